"""The ready queue: ``weft_run_ready_idx``, pending runs in pickup order.

A partial index (``status = 'pending'``) on ``start_at, created_at, id``, for
the intake's window (weft_django/ownership/intake.py). Created only where the
database has partial indexes (PostgreSQL, SQLite). MariaDB/MySQL has none:
there Django would build a full index on every run, a duplicate of
``weft_run_active_idx`` (``status, start_at, created_at``, also a full index
there, with InnoDB's implicit primary key after it), which already serves the
window in the same order; so nothing is created there and the model state
alone records the index.
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

INDEX = models.Index(
    condition=models.Q(("status", "pending")),
    fields=["start_at", "created_at", "id"],
    name="weft_run_ready_idx",
)


def _partial(schema_editor: BaseDatabaseSchemaEditor) -> bool:
    return schema_editor.connection.features.supports_partial_indexes


def create(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if _partial(schema_editor):
        schema_editor.add_index(apps.get_model("weft_django", "WorkflowRun"), INDEX)


def drop(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if _partial(schema_editor):
        schema_editor.remove_index(apps.get_model("weft_django", "WorkflowRun"), INDEX)


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0006_admin_console"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(create, drop)],
            state_operations=[migrations.AddIndex(model_name="workflowrun", index=INDEX)],
        ),
    ]
