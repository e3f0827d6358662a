"""Workflow versions side by side (docs/deploying-code.md): each engine row
records the workflows it serves (``name -> versions`` registered in its
process), so the overview can name runs of a version no live engine has.
The claim queries filter on ``workflow_version`` beside ``workflow_name`` as
plain filters over the ready queue's index: no index changes."""

from django.core.serializers.json import DjangoJSONEncoder
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0017_run_links"),
    ]

    operations = [
        migrations.AddField(
            model_name="engine",
            name="workflows",
            field=models.JSONField(
                blank=True,
                default=dict,
                encoder=DjangoJSONEncoder,
                help_text="The workflows this engine serves: name -> the versions registered "
                "in its process (it claims only runs of these).",
            ),
        ),
    ]
