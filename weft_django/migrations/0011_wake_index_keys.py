"""The wake indexes in ``(time, id)`` order, for the fast tick's due-runs query.

``weft_run_wake_at_idx`` and ``weft_run_wake_hint_idx`` were on the time alone;
the fast tick (``scans.held_woken``) now walks them in ``(time, id)`` order in
pages, so each gains ``id`` and an ordered walk needs no sort. Partial
(``IS NOT NULL``) where the database has partial indexes (PostgreSQL, SQLite);
Django builds them as full indexes on MariaDB/MySQL, where a run without a
timer or a hint sorts first as NULL and is never read by the tick's range.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0010_fewer_indexes"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="workflowrun", name="weft_run_wake_at_idx"),
        migrations.RemoveIndex(model_name="workflowrun", name="weft_run_wake_hint_idx"),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("wake_at__isnull", False)),
                fields=["wake_at", "id"],
                name="weft_run_wake_at_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                condition=models.Q(("wake_hint_at__isnull", False)),
                fields=["wake_hint_at", "id"],
                name="weft_run_wake_hint_idx",
            ),
        ),
    ]
