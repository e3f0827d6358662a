"""Drop single-column indexes that a composite index already covers.

Every index is written on each insert, and on each update that moves the row
out of a heap-only update (a run's status move): a checkpoint wrote four index
entries for its event, a run's status move fifteen. The dropped indexes are
the ones whose column leads another index of the same table:

- the run of an event, signal and update request (each table's unique
  constraint leads with the run),
- a claim's holder (``weft_claim_holder_wid_idx``),
- a run's workflow name (``weft_run_name_created_idx``),
- on PostgreSQL, the ``varchar_pattern_ops`` copies Django adds for text
  columns (``LIKE`` lookups, which nothing here makes): of the runs' and
  claims' primary keys and of the columns above,
- a run's parent id keeps one plain index (``weft_run_parent_idx``) in place
  of its two.

The state changes with ``AlterField``; the database side finds the indexes by
introspection and drops them, so SQLite does not rebuild the tables. On
MariaDB/MySQL the indexes InnoDB keeps for foreign keys are left to it.
Reversing recreates nothing: the composite indexes serve every lookup.
"""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

# table -> (column, is a foreign key)
REDUNDANT = {
    "weft_django_workflowevent": (("run_id", True),),
    "weft_django_workflowsignal": (("run_id", True),),
    "weft_django_updaterequest": (("run_id", True),),
    "weft_django_claim": (("holder_id", True), ("workflow_id", False)),
    "weft_django_workflowrun": (("workflow_name", False), ("parent_id", False), ("id", False)),
}
KEEP = {"weft_run_parent_idx"}


def drop_redundant_indexes(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    quote = schema_editor.quote_name
    with connection.cursor() as cursor:
        for table, columns in REDUNDANT.items():
            constraints = connection.introspection.get_constraints(cursor, table)
            for column, foreign_key in columns:
                if connection.vendor == "mysql" and foreign_key:
                    continue  # InnoDB's own index for the constraint
                for name, info in constraints.items():
                    if (
                        name in KEEP
                        or not info["index"]
                        or info["unique"]
                        or info["primary_key"]
                        or info["foreign_key"]
                        or info["columns"] != [column]
                    ):
                        continue
                    if connection.vendor == "mysql":
                        schema_editor.execute(f"DROP INDEX {quote(name)} ON {quote(table)}")
                    else:
                        schema_editor.execute(f"DROP INDEX {quote(name)}")


def _fk(related_name: str, to: str, **extra: Any) -> models.ForeignKey:
    return models.ForeignKey(
        db_index=False,
        related_name=related_name,
        to=to,
        **extra,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("weft_django", "0009_takeover_scale"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="claim",
                    name="holder",
                    field=_fk(
                        "claims",
                        "weft_django.engine",
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                    ),
                ),
                *(
                    migrations.AlterField(
                        model_name=model_name,
                        name="run",
                        field=_fk(
                            related_name,
                            "weft_django.workflowrun",
                            on_delete=django.db.models.deletion.CASCADE,
                        ),
                    )
                    for model_name, related_name in (
                        ("updaterequest", "updates"),
                        ("workflowevent", "events"),
                        ("workflowsignal", "signals"),
                    )
                ),
                migrations.AlterField(
                    model_name="workflowrun",
                    name="parent_id",
                    field=models.CharField(blank=True, default="", max_length=255),
                ),
                migrations.AlterField(
                    model_name="workflowrun",
                    name="workflow_name",
                    field=models.CharField(max_length=255),
                ),
            ],
            database_operations=[
                migrations.RunPython(drop_redundant_indexes, migrations.RunPython.noop),
            ],
        ),
        migrations.AddIndex(
            model_name="workflowrun",
            index=models.Index(fields=["parent_id"], name="weft_run_parent_idx"),
        ),
    ]
