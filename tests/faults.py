"""Database faults for tests: a database that keeps refusing one run's checkpoints."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from weft_django.models import WorkflowEvent

TRIGGER = "weft_test_refuse_checkpoint"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _statements(run_id: str, message: str) -> tuple[list[str], list[str]]:
    table = connection.ops.quote_name(WorkflowEvent._meta.db_table)
    literal, refusal = _literal(run_id), _literal(message)
    if connection.vendor == "sqlite":
        create = [
            f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON {table} WHEN NEW.run_id = {literal} "
            f"BEGIN SELECT RAISE(ABORT, {refusal}); END"
        ]
        return create, [f"DROP TRIGGER IF EXISTS {TRIGGER}"]
    if connection.vendor == "mysql":
        # SIGNAL raises error 1644 (ER_SIGNAL_EXCEPTION): a refusal, not a transient failure.
        create = [
            f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON {table} FOR EACH ROW BEGIN "
            f"IF NEW.run_id = {literal} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = {refusal}; "
            "END IF; END"
        ]
        return create, [f"DROP TRIGGER IF EXISTS {TRIGGER}"]
    if connection.vendor == "postgresql":
        create = [
            f"CREATE OR REPLACE FUNCTION {TRIGGER}() RETURNS trigger AS $$ BEGIN "
            f"IF NEW.run_id = {literal} THEN RAISE EXCEPTION {refusal}; END IF; "
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
def refused_checkpoints(run_id: str, message: str = "checkpoint refused") -> Iterator[None]:
    """Every history event insert of ``run_id`` fails in the database (a trigger
    raising ``message``), in every process, until the block ends: a turn of that
    run is abandoned. On MySQL/MariaDB creating a trigger commits the open
    transaction (DDL): use it only in ``transaction=True`` tests."""
    create, drop = _statements(run_id, message)
    with connection.cursor() as cursor:
        for sql in create:
            cursor.execute(sql)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for sql in drop:
                cursor.execute(sql)
