"""Fenced writes: a transaction that first proves this engine still owns the run.

The proof is a row lock on the claim (PostgreSQL: ``FOR SHARE``, which any
takeover or revocation UPDATE must wait for) or, on databases without row
locks, a no-op conditional UPDATE that takes the write lock. Either way the
check and every write after it commit together or not at all; a failed check
raises :class:`~weft_django.exceptions.EngineDeposedError` and rolls back
everything done inside the block, user ORM writes included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.db.models import F

from ..conf import MODE_LEASE, MODE_NONE
from ..exceptions import EngineDeposedError
from ..models import Claim, GlobalLease, WorkflowEvent


def _check(
    using: str,
    model: type[Claim] | type[GlobalLease],
    key: str,
    value: object,
    engine_id: str,
    epoch: int,
) -> bool:
    connection = connections[using]
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(model._meta.db_table)
        column = connection.ops.quote_name(model._meta.get_field(key).column)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {table} WHERE {column} = %s AND holder_id = %s "
                "AND epoch = %s FOR SHARE",
                [value, engine_id, epoch],
            )
            return cursor.fetchone() is not None
    filters = {key: value, "holder_id": engine_id, "epoch": epoch}
    return model.objects.using(using).filter(**filters).update(epoch=F("epoch")) == 1


@contextmanager
def fenced(
    workflow_id: str,
    *,
    engine_id: str,
    epoch: int,
    mode: str,
    using: str = "default",
) -> Iterator[None]:
    """``with fenced(...):`` run writes that only the current owner may commit.

    ``epoch`` is the claim epoch (mode ``workflow-lease``) or the global lease
    epoch (mode ``lease``); mode ``none`` only opens a transaction.
    """
    with transaction.atomic(using=using):
        if mode == MODE_LEASE:
            ok = _check(using, GlobalLease, "id", 1, engine_id, epoch)
        elif mode == MODE_NONE:
            ok = True
        else:
            ok = _check(using, Claim, "workflow_id", workflow_id, engine_id, epoch)
        if not ok:
            raise EngineDeposedError(workflow_id)
        yield


EVENT_COLUMNS = (
    "run_id",
    "seq",
    "kind",
    "name",
    "result",
    "error",
    "engine_id",
    "epoch",
    "created_at",
)


def fenced_insert(
    using: str,
    *,
    workflow_id: str,
    engine_id: str,
    epoch: int,
    rows: list[tuple[Any, ...]],
) -> bool | None:
    """Insert event rows *and* prove ownership in one statement (one round trip).

    ``rows`` are tuples in :data:`EVENT_COLUMNS` order with JSON already
    encoded as text. The claim check is part of the INSERT: on PostgreSQL a
    ``FOR SHARE`` lock in a CTE (a concurrent takeover waits, or we see its
    result and insert nothing); on SQLite the statement runs under the
    database's single write lock. Returns True when inserted, False when this
    engine no longer holds the claim at ``epoch``, None when the backend has
    no single-statement form (use :func:`fenced`).
    """
    connection = connections[using]
    quote = connection.ops.quote_name
    event_table = quote(WorkflowEvent._meta.db_table)
    claim_table = quote(Claim._meta.db_table)
    columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
    params: list[Any] = []
    if connection.vendor == "postgresql":
        one = "(%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s)"
        params.extend([workflow_id, engine_id, epoch])
        for row in rows:
            params.extend(row)
        sql = (
            f"WITH fence AS (SELECT 1 FROM {claim_table} WHERE workflow_id = %s "
            f"AND holder_id = %s AND epoch = %s FOR SHARE) "
            f"INSERT INTO {event_table} ({columns}) "
            f"SELECT v.* FROM (VALUES {', '.join([one] * len(rows))}) "
            f"AS v({columns}) CROSS JOIN fence"
        )
    elif connection.vendor == "sqlite":
        one = "(" + ", ".join(["%s"] * len(EVENT_COLUMNS)) + ")"
        for row in rows:
            params.extend(
                value
                if not isinstance(value, datetime)
                else str(connection.ops.adapt_datetimefield_value(value))
                for value in row
            )
        params.extend([workflow_id, engine_id, epoch])
        sql = (
            f"INSERT INTO {event_table} ({columns}) "
            f"SELECT * FROM (VALUES {', '.join([one] * len(rows))}) "
            f"WHERE EXISTS (SELECT 1 FROM {claim_table} WHERE workflow_id = %s "
            "AND holder_id = %s AND epoch = %s)"
        )
    else:
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        inserted = cursor.rowcount
    if inserted == len(rows):
        return True
    if inserted == 0:
        return False
    raise DatabaseError(f"fenced insert wrote {inserted} of {len(rows)} events")
