"""The overview an operator can trust (docs/admin.md): one summary row per Celery
pass kind (``PassSummary``, upserted by every pass, so the table never grows),
and the engine indexes the overview's live / dead / recently stopped lists and
retention's walk over dead engines read.

On MySQL/MariaDB the new table gets the binary, no-pad collation of migration
0005 (its ``kind`` and ``engine_id`` are compared exactly).
"""

from django.apps.registry import Apps
from django.core.serializers.json import DjangoJSONEncoder
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from weft_django.models import mysql_collation


def binary_collation(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    table = apps.get_model("weft_django", "PassSummary")._meta.db_table
    schema_editor.execute(
        f"ALTER TABLE {connection.ops.quote_name(table)} CONVERT TO CHARACTER SET utf8mb4 "
        f"COLLATE {mysql_collation(connection)}"
    )


class Migration(migrations.Migration):
    atomic = False  # DDL: MySQL cannot roll it back anyway

    dependencies = [
        ("weft_django", "0013_claim_release_rule"),
    ]

    operations = [
        migrations.CreateModel(
            name="PassSummary",
            fields=[
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("signal_poll", "signal poll"),
                            ("update_poll", "update poll"),
                            ("prune", "prune"),
                        ],
                        max_length=32,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("hostname", models.CharField(blank=True, default="", max_length=255)),
                ("pid", models.PositiveIntegerField(blank=True, null=True)),
                ("engine_id", models.CharField(blank=True, default="", max_length=64)),
                ("started_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField()),
                ("succeeded", models.BooleanField(default=True)),
                ("counts", models.JSONField(blank=True, default=dict, encoder=DjangoJSONEncoder)),
                ("error", models.TextField(blank=True, default="")),
                (
                    "failures",
                    models.JSONField(blank=True, default=list, encoder=DjangoJSONEncoder),
                ),
                ("last_error", models.TextField(blank=True, default="")),
                ("last_error_at", models.DateTimeField(blank=True, null=True)),
                (
                    "passes",
                    models.BigIntegerField(default=0, help_text="Passes of this kind recorded."),
                ),
            ],
            options={
                "verbose_name": "Celery pass summary",
                "verbose_name_plural": "Celery pass summaries",
                "ordering": ["kind"],
            },
        ),
        migrations.RunPython(binary_collation, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name="engine",
            index=models.Index(fields=["status", "lease_expires_at"], name="weft_engine_lease_idx"),
        ),
        migrations.AddIndex(
            model_name="engine",
            index=models.Index(
                fields=["status", "kind", "stopped_at"], name="weft_engine_kind_stopped_idx"
            ),
        ),
    ]
