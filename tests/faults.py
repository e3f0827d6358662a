"""Database faults for tests: a database that keeps refusing one run's checkpoints."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from weft_django.models import WorkflowEvent

TRIGGER = "weft_test_refuse_checkpoint"


def _statements(run_id: str) -> tuple[list[str], list[str]]:
    table = connection.ops.quote_name(WorkflowEvent._meta.db_table)
    literal = "'" + run_id.replace("'", "''") + "'"
    if connection.vendor == "sqlite":
        create = [
            f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON {table} WHEN NEW.run_id = {literal} "
            "BEGIN SELECT RAISE(ABORT, 'checkpoint refused'); END"
        ]
        return create, [f"DROP TRIGGER IF EXISTS {TRIGGER}"]
    if connection.vendor == "postgresql":
        create = [
            f"CREATE OR REPLACE FUNCTION {TRIGGER}() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.run_id = {literal} THEN RAISE EXCEPTION 'checkpoint refused'; END IF; "
            "RETURN NEW; END $$ LANGUAGE plpgsql",
            f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON {table} FOR EACH ROW "
            f"EXECUTE FUNCTION {TRIGGER}()",
        ]
        return create, [
            f"DROP TRIGGER IF EXISTS {TRIGGER} ON {table}",
            f"DROP FUNCTION IF EXISTS {TRIGGER}()",
        ]
    raise NotImplementedError(f"no checkpoint fault for {connection.vendor}")


@contextmanager
def refused_checkpoints(run_id: str) -> Iterator[None]:
    """Every history event insert of ``run_id`` fails in the database (a trigger),
    in every process, until the block ends: a turn of that run is abandoned."""
    create, drop = _statements(run_id)
    with connection.cursor() as cursor:
        for sql in create:
            cursor.execute(sql)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for sql in drop:
                cursor.execute(sql)
