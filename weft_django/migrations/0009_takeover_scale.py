"""Indexes for the batched takeover: one holder's claims in id order, and the
started runs in id order per status (PostgreSQL and SQLite; MariaDB has no
partial indexes)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0008_retention"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="claim",
            index=models.Index(fields=["holder", "workflow_id"], name="weft_claim_holder_wid_idx"),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("status__in", ["running", "waiting"])),
                fields=["status", "id"],
                name="weft_run_started_id_idx",
            ),
        ),
    ]
