"""Flow control (docs/flow-control.md): each run's ``queue``, ``priority`` and
``concurrency_key``; ``QueueSlot``, the numbered concurrency slots of each
queue (and key); ``QueueRate``, the rate limiters' cells; and
``weft_run_priority_idx``, the intake's fast lane of pending runs with a
positive priority (a partial index on PostgreSQL and SQLite; MariaDB/MySQL has
no partial indexes, so there it is a full index on the same columns).

On MySQL/MariaDB the new tables get the binary, no-pad collation of migration
0005 (queue names, keys and run ids are compared exactly).
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from weft_django.models import mysql_collation

PRIORITY_INDEX = models.Index(
    condition=models.Q(("priority__gt", 0), ("status", "pending")),
    fields=["status", "-priority", "created_at", "id"],
    name="weft_run_priority_idx",
)
FULL_PRIORITY_INDEX = models.Index(
    fields=["status", "-priority", "created_at", "id"], name="weft_run_priority_idx"
)


def create(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    run = apps.get_model("weft_django", "WorkflowRun")
    if connection.features.supports_partial_indexes:
        schema_editor.add_index(run, PRIORITY_INDEX)
        return
    schema_editor.add_index(run, FULL_PRIORITY_INDEX)
    if connection.vendor == "mysql":
        for name in ("QueueSlot", "QueueRate"):
            table = apps.get_model("weft_django", name)._meta.db_table
            schema_editor.execute(
                f"ALTER TABLE {connection.ops.quote_name(table)} CONVERT TO CHARACTER SET "
                f"utf8mb4 COLLATE {mysql_collation(connection)}"
            )


def drop(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    run = apps.get_model("weft_django", "WorkflowRun")
    partial = connection.features.supports_partial_indexes
    schema_editor.remove_index(run, PRIORITY_INDEX if partial else FULL_PRIORITY_INDEX)


class Migration(migrations.Migration):
    atomic = False  # DDL: MySQL cannot roll it back anyway

    dependencies = [
        ("weft_django", "0018_workflow_versions"),
    ]

    operations = [
        migrations.CreateModel(
            name="QueueRate",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=64)),
                ("key", models.CharField(blank=True, default="", max_length=128)),
                ("tat", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "queue rate limiter",
            },
        ),
        migrations.CreateModel(
            name="QueueSlot",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=64)),
                ("key", models.CharField(blank=True, default="", max_length=128)),
                ("slot_no", models.PositiveIntegerField()),
                ("run_id", models.CharField(blank=True, max_length=255, null=True)),
                ("engine_id", models.CharField(blank=True, default="", max_length=64)),
                ("epoch", models.BigIntegerField(default=0)),
                ("taken_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "queue slot",
                "indexes": [models.Index(fields=["run_id"], name="weft_queue_slot_run_idx")],
            },
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="concurrency_key",
            field=models.CharField(blank=True, max_length=128, null=True),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="priority",
            field=models.SmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="queue",
            field=models.CharField(db_default="default", default="default", max_length=64),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(create, drop, elidable=False)],
            state_operations=[migrations.AddIndex(model_name="workflowrun", index=PRIORITY_INDEX)],
        ),
        migrations.AddConstraint(
            model_name="queuerate",
            constraint=models.UniqueConstraint(
                fields=("queue", "key"), name="weft_queue_rate_uniq"
            ),
        ),
        migrations.AddConstraint(
            model_name="queueslot",
            constraint=models.UniqueConstraint(
                fields=("queue", "key", "slot_no"), name="weft_queue_slot_uniq"
            ),
        ),
    ]
