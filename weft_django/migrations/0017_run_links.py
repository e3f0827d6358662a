"""``WorkflowRun.origin_id`` and ``origin_step``: the run a ``weft.retry`` or
``weft.fork`` was made from (``origin_step``: the step a fork ran again from;
None for a retry). Nullable columns, so adding them rewrites no row."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0016_schedules"),
    ]

    operations = [
        migrations.AddField(
            model_name="workflowrun",
            name="origin_id",
            field=models.CharField(blank=True, max_length=255, null=True),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="origin_step",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(fields=["origin_id"], name="weft_run_origin_idx"),
        ),
    ]
