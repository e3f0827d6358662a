"""Cron schedules (docs/schedules.md): ``Schedule``, one row of firing state per
declared schedule, and ``ScheduleLease``, the single-row lease of the firing
pass.

On MySQL/MariaDB the new tables get the binary, no-pad collation of migration
0005 (schedule names and run ids are compared exactly).
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from weft_django.models import mysql_collation


def binary_collation(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    for name in ("Schedule", "ScheduleLease"):
        table = apps.get_model("weft_django", name)._meta.db_table
        schema_editor.execute(
            f"ALTER TABLE {connection.ops.quote_name(table)} CONVERT TO CHARACTER SET utf8mb4 "
            f"COLLATE {mysql_collation(connection)}"
        )


class Migration(migrations.Migration):
    atomic = False  # DDL: MySQL cannot roll it back anyway

    dependencies = [
        ("weft_django", "0015_engine_kind_labels"),
    ]

    operations = [
        migrations.CreateModel(
            name="Schedule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200, unique=True)),
                ("workflow_name", models.CharField(max_length=255)),
                ("cron", models.CharField(max_length=200)),
                ("timezone", models.CharField(default="UTC", max_length=64)),
                ("catch_up", models.CharField(default="latest", max_length=16)),
                ("overlap", models.CharField(default="allow", max_length=16)),
                ("paused", models.BooleanField(default=False)),
                ("next_tick", models.DateTimeField(blank=True, null=True)),
                ("last_tick", models.DateTimeField(blank=True, null=True)),
                ("last_fired_at", models.DateTimeField(blank=True, null=True)),
                ("last_run_id", models.CharField(blank=True, default="", max_length=255)),
                ("queued_tick", models.DateTimeField(blank=True, null=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "schedule",
                "verbose_name_plural": "schedules",
                "ordering": ["name"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("catch_up__in", ["skip", "latest", "all"])),
                        name="weft_schedule_catch_up_known",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("overlap__in", ["allow", "skip", "queue"])),
                        name="weft_schedule_overlap_known",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="ScheduleLease",
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
                "verbose_name": "schedule lease",
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("id", 1)), name="weft_schedule_lease_singleton"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("token__gte", 0)),
                        name="weft_schedule_lease_token_nonnegative",
                    ),
                ],
            },
        ),
        migrations.RunPython(binary_collation, migrations.RunPython.noop, elidable=False),
    ]
