"""The release rule (``weft_django.ownership.release``): a claim let go of while
its run is still active carries ``released_at``.

Before it, ``resume`` (through the revoke path) left a resumed run's claim
without a holder and without the stamp, so the reclaim pass never saw it and
it waited for the full sweep (every 600 s; issue 24). This stamps the claims
that bug left behind: no holder, no stamp, run running or waiting. One UPDATE;
nothing to undo on the way back (the stamp only makes the pass read a claim
that is free to take anyway).
"""

from django.db import migrations
from django.db.models.functions import Now


def stamp_free_started(apps, schema_editor):  # type: ignore[no-untyped-def]
    using = schema_editor.connection.alias
    claim = apps.get_model("weft_django", "Claim")
    run = apps.get_model("weft_django", "WorkflowRun")
    started = run.objects.using(using).filter(status__in=("running", "waiting")).values("id")
    claim.objects.using(using).filter(
        holder__isnull=True, released_at__isnull=True, workflow_id__in=started
    ).update(released_at=Now())


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0012_claim_released_at"),
    ]

    operations = [
        migrations.RunPython(stamp_free_started, migrations.RunPython.noop, elidable=True),
    ]
