"""Retention (docs/retention.md): the index retention walks finished runs by,
and the single-row lease of the optional worker prune pass.

On MySQL/MariaDB the new table gets the binary, no-pad collation of migration
0005 (its ``holder`` is an engine id, compared exactly).
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from weft_django.models import mysql_collation


def binary_collation(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    table = apps.get_model("weft_django", "PrunerLease")._meta.db_table
    schema_editor.execute(
        f"ALTER TABLE {connection.ops.quote_name(table)} CONVERT TO CHARACTER SET utf8mb4 "
        f"COLLATE {mysql_collation(connection)}"
    )


class Migration(migrations.Migration):
    atomic = False  # DDL: MySQL cannot roll it back anyway

    dependencies = [
        ("weft_django", "0007_ready_queue"),
    ]

    operations = [
        migrations.CreateModel(
            name="PrunerLease",
            fields=[
                (
                    "id",
                    models.PositiveSmallIntegerField(
                        default=1, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("token", models.BigIntegerField(default=0)),
                ("holder", models.CharField(blank=True, default="", max_length=64)),
                ("acquired_at", models.DateTimeField(blank=True, null=True)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "pruner lease",
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("id", 1)), name="weft_pruner_lease_singleton"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("token__gte", 0)),
                        name="weft_pruner_lease_token_nonnegative",
                    ),
                ],
            },
        ),
        migrations.RunPython(binary_collation, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name="engine",
            index=models.Index(
                fields=["status", "stopped_at", "id"], name="weft_engine_stopped_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(
                fields=["status", "finished_at", "id"], name="weft_run_finished_idx"
            ),
        ),
    ]
