"""``Claim.released_at``: the reclaim sweep reads the claims let go of before
their run ended, off a partial index, instead of every started run.

A holder that lets go of a run it has not finished (a graceful shutdown, a
release at park) stamps ``released_at``; the run's end clears it. The
existing ownerless claims of started runs are stamped here. The index is
partial (PostgreSQL, SQLite); MariaDB/MySQL have no partial indexes and
keep sweeping the started runs.
"""

from django.db import migrations, models
from django.db.models.functions import Now


def stamp_ownerless(apps, schema_editor):  # type: ignore[no-untyped-def]
    using = schema_editor.connection.alias
    claim = apps.get_model("weft_django", "Claim")
    run = apps.get_model("weft_django", "WorkflowRun")
    started = run.objects.using(using).filter(status__in=("running", "waiting")).values("id")
    claim.objects.using(using).filter(holder__isnull=True, workflow_id__in=started).update(
        released_at=Now()
    )


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0011_wake_index_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="claim",
            name="released_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="claim",
            index=models.Index(
                condition=models.Q(("holder__isnull", True), ("released_at__isnull", False)),
                fields=["workflow_id"],
                name="weft_claim_released_idx",
            ),
        ),
        migrations.RunPython(stamp_ownerless, migrations.RunPython.noop, elidable=True),
    ]
