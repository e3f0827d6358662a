"""MySQL/MariaDB only: weft's tables in utf8mb4 with a binary, no-pad collation.

The server's default collations ignore case, accents and trailing spaces, so
two distinct workflow ids (or signal names, update ids) could collide or match
each other. A no-op on every other database. Runs only Python (``sqlmigrate``
shows no SQL for it): the boot gate checks the result.
"""

from django.apps.registry import Apps
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from weft_django.models import mysql_collation


FOREIGN_KEYS = """
SELECT k.CONSTRAINT_NAME, k.TABLE_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME,
       k.REFERENCED_COLUMN_NAME, r.UPDATE_RULE, r.DELETE_RULE
FROM information_schema.KEY_COLUMN_USAGE k
JOIN information_schema.REFERENTIAL_CONSTRAINTS r
  ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME
 AND r.TABLE_NAME = k.TABLE_NAME
WHERE k.TABLE_SCHEMA = DATABASE() AND k.REFERENCED_TABLE_NAME IN ({tables})
ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME
"""


def convert(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    collation = mysql_collation(connection)
    quote = connection.ops.quote_name
    tables = [model._meta.db_table for model in apps.get_app_config("weft_django").get_models()]
    with connection.cursor() as cursor:
        cursor.execute(FOREIGN_KEYS.format(tables=", ".join(["%s"] * len(tables))), tables)
        keys = cursor.fetchall()
    outside = sorted({f"{key[1]}.{key[2]}" for key in keys if key[1] not in tables})
    if outside:
        raise RuntimeError(
            f"Cannot give weft_django's tables a binary collation: {', '.join(outside)} "
            "refer to them by foreign key and would need the same collation. Drop those "
            "foreign keys, migrate, then re-create them with columns in "
            f"CHARACTER SET utf8mb4 COLLATE {collation}."
        )
    # MariaDB refuses to change the collation of a column in a foreign key, even
    # with foreign_key_checks off: drop weft's own keys, convert, re-create them.
    for name, table, *_ in keys:
        schema_editor.execute(f"ALTER TABLE {quote(table)} DROP FOREIGN KEY {quote(name)}")
    for table in tables:
        schema_editor.execute(
            f"ALTER TABLE {quote(table)} CONVERT TO CHARACTER SET utf8mb4 COLLATE {collation}"
        )
    for name, table, column, target, target_column, on_update, on_delete in keys:
        schema_editor.execute(
            f"ALTER TABLE {quote(table)} ADD CONSTRAINT {quote(name)} FOREIGN KEY "
            f"({quote(column)}) REFERENCES {quote(target)} ({quote(target_column)}) "
            f"ON UPDATE {on_update} ON DELETE {on_delete}"
        )


class Migration(migrations.Migration):
    atomic = False  # DDL: MySQL cannot roll it back anyway

    dependencies = [
        ("weft_django", "0004_engine_passes"),
    ]

    operations = [
        migrations.RunPython(convert, migrations.RunPython.noop, elidable=False),
    ]
