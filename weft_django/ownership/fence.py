"""Fenced writes: a transaction that first proves this engine still owns the run.

The proof is a locking read of the fence row (the run's claim, or the global
lease), held to commit, which any takeover or revocation UPDATE of that row
must wait for; a locking read always sees the latest committed row, so an
owner that lost the claim sees it. Databases without row locks (SQLite) run a
no-op conditional UPDATE that takes the write lock instead. Either way the
check and every write after it commit together or not at all; a failed check
raises :class:`~weft_django.exceptions.EngineDeposedError` and rolls back
everything done inside the block, user ORM writes included.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.db.models import F

from ..exceptions import EngineDeposedError
from ..models import Claim, GlobalLease, UpdateRequest, WorkflowEvent, WorkflowRun, db_for

# The locking read that proves a fence row, per vendor and row. MySQL/MariaDB
# lock the claim exclusively: a fenced transaction may release the claim
# before it commits (the terminal commit), and upgrading a shared lock to that
# UPDATE deadlocks with a revocation already queued on the row. The global
# lease row is shared by every run of mode ``lease``: a shared lock, so the
# holder's turns do not queue behind each other. (MariaDB has no ``FOR SHARE``.)
LOCKING_READS = {
    "postgresql": {Claim: "FOR SHARE", GlobalLease: "FOR SHARE"},
    "mysql": {Claim: "FOR UPDATE", GlobalLease: "LOCK IN SHARE MODE"},
}


def _holds(
    using: str,
    model: type[Claim] | type[GlobalLease],
    key: str,
    value: str | int,
    engine_id: str,
    epoch: int,
) -> bool:
    connection = connections[using]
    locking = LOCKING_READS.get(connection.vendor)
    if locking is not None:
        table = connection.ops.quote_name(model._meta.db_table)
        field = model._meta.get_field(key)  # the primary key: a concrete Field
        column = connection.ops.quote_name(getattr(field, "column", None) or key)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {table} WHERE {column} = %s AND holder_id = %s "
                f"AND epoch = %s {locking[model]}",
                [value, engine_id, epoch],
            )
            return cursor.fetchone() is not None
    filters = {key: value, "holder_id": engine_id, "epoch": epoch}
    return model.objects.using(using).filter(**filters).update(epoch=F("epoch")) == 1


@contextmanager
def fenced(
    workflow_id: str, *, engine_id: str, epoch: int, using: str | None = None
) -> Iterator[None]:
    """``with fenced(...):`` run writes that only the holder of the run's claim
    at ``epoch`` may commit."""
    using = db_for(using)
    with transaction.atomic(using=using):
        if not _holds(using, Claim, "workflow_id", workflow_id, engine_id, epoch):
            raise EngineDeposedError(workflow_id)
        yield


@contextmanager
def fenced_by_global_lease(
    workflow_id: str, *, engine_id: str, epoch: int, using: str | None = None
) -> Iterator[None]:
    """The same, proven by the global lease of mode ``lease`` at ``epoch``."""
    using = db_for(using)
    with transaction.atomic(using=using):
        if not _holds(using, GlobalLease, "id", 1, engine_id, epoch):
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
    mark_running: tuple[str, datetime | None] | None = None,
) -> bool | None:
    """Insert event rows *and* prove ownership in one statement (one round trip).

    ``mark_running=(stamp_sql, wake_at)`` also moves the run to ``running`` in
    the same statement (PostgreSQL only; elsewhere None is returned for it).

    ``rows`` are tuples in :data:`EVENT_COLUMNS` order with JSON already
    encoded as text. The claim check is part of the INSERT: on PostgreSQL a
    ``FOR SHARE`` lock in a CTE, on MySQL/MariaDB a ``LOCK IN SHARE MODE`` join
    of the claim row (a concurrent takeover waits, or we see its result and
    insert nothing; without the lock clause MySQL's INSERT ... SELECT reads the
    claim as a snapshot under READ COMMITTED); on SQLite the statement runs
    under the database's single write lock. Returns True when inserted, False
    when this engine no longer holds the claim at ``epoch``, None when the
    backend has no single-statement form (use :func:`fenced`).
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
        running = ""
        if mark_running is not None:
            stamp, wake_at = mark_running
            run_table = quote(WorkflowRun._meta.db_table)
            running = (
                f", upd AS (UPDATE {run_table} SET status = 'running', "
                f"started_at = COALESCE(started_at, {stamp}), updated_at = {stamp}, "
                "waiting_on = NULL, wake_at = %s "
                "WHERE id = %s AND EXISTS (SELECT 1 FROM fence))"
            )
            params.extend([wake_at, workflow_id])
        for row in rows:
            params.extend(row)
        sql = (
            f"{_pg_fence_cte(connection)}{running} "
            f"INSERT INTO {event_table} ({columns}) "
            f"SELECT v.* FROM (VALUES {', '.join([one] * len(rows))}) "
            f"AS v({columns}) CROSS JOIN fence"
        )
    elif connection.vendor == "sqlite" and mark_running is None:
        one = "(" + ", ".join(["%s"] * len(EVENT_COLUMNS)) + ")"
        params.extend(_adapted(connection, rows))
        params.extend([workflow_id, engine_id, epoch])
        sql = (
            f"INSERT INTO {event_table} ({columns}) "
            f"SELECT * FROM (VALUES {', '.join([one] * len(rows))}) "
            f"WHERE EXISTS (SELECT 1 FROM {claim_table} WHERE workflow_id = %s "
            "AND holder_id = %s AND epoch = %s)"
        )
    elif connection.vendor == "mysql" and mark_running is None:
        # A derived table of SELECTs (MariaDB and MySQL spell VALUES rows apart).
        first = ", ".join(f"%s AS c{index}" for index in range(len(EVENT_COLUMNS)))
        more = " UNION ALL SELECT " + ", ".join(["%s"] * len(EVENT_COLUMNS))
        params.extend(_adapted(connection, rows))
        params.extend([workflow_id, engine_id, epoch])
        sql = (
            f"INSERT INTO {event_table} ({columns}) "
            f"SELECT v.* FROM (SELECT {first}{more * (len(rows) - 1)}) AS v "
            f"CROSS JOIN {claim_table} AS fence WHERE fence.workflow_id = %s "
            "AND fence.holder_id = %s AND fence.epoch = %s LOCK IN SHARE MODE"
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


def _adapted(connection: Any, rows: list[tuple[Any, ...]]) -> Iterator[Any]:
    """Row values as query parameters, datetimes as the backend stores them."""
    for row in rows:
        for value in row:
            if isinstance(value, datetime):
                yield str(connection.ops.adapt_datetimefield_value(value))
            else:
                yield value


def _pg_events_cte(
    connection: Any, rows: list[tuple[Any, ...]], gate: str
) -> tuple[str, list[Any]]:
    """PostgreSQL: the CTE ``ins`` inserting ``rows`` (EVENT_COLUMNS order) only
    when the CTE ``gate`` has a row; its SQL and parameters."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
    one = "(%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s)"
    sql = (
        f"ins AS (INSERT INTO {quote(WorkflowEvent._meta.db_table)} ({columns}) SELECT v.* "
        f"FROM (VALUES {', '.join([one] * len(rows))}) AS v({columns}) CROSS JOIN {gate})"
    )
    return sql, [value for row in rows for value in row]


def _pg_add_events(
    connection: Any, parts: list[str], params: list[Any], rows: list[tuple[Any, ...]], gate: str
) -> None:
    """Add the CTE ``ins`` for ``rows`` behind ``gate`` to a statement being built
    (nothing when there are no rows)."""
    if rows:
        sql, values = _pg_events_cte(connection, rows, gate)
        parts.append(sql)
        params.extend(values)


def _pg_fence_cte(connection: Any) -> str:
    """PostgreSQL: the CTE ``fence``, one row while the claim holds (workflow id,
    engine id and epoch as parameters), locked ``FOR SHARE`` to commit."""
    claim_table = connection.ops.quote_name(Claim._meta.db_table)
    return (
        f"WITH fence AS (SELECT 1 FROM {claim_table} WHERE workflow_id = %s "
        "AND holder_id = %s AND epoch = %s FOR SHARE)"
    )


def _pg_stamp(stamp: str | None, now: Callable[[], datetime]) -> tuple[str, list[Any]]:
    """SQL for "now" and its parameters: ``stamp`` as is, else ``now()`` passed."""
    if stamp is None:
        return "%s", [now()]
    return stamp, []


def fenced_finish(
    using: str,
    *,
    workflow_id: str,
    engine_id: str,
    epoch: int,
    rows: list[tuple[Any, ...]],
    status: str,
    result_json: str | None,
    error_json: str | None,
    parent_id: str,
    stamp: str | None,
    now: Callable[[], datetime],
    response_ttl: float,
) -> bool | None:
    """The terminal commit of a run as one statement (PostgreSQL; None elsewhere).

    The claim's release (conditional on holder and epoch) *is* the fence: the
    other parts (last events, terminal status, closing open update requests,
    the parent's wake hint) happen only if it released. ``stamp`` is the SQL
    for "now" (``clock_timestamp()``); when None, ``now()`` is read and passed
    as a parameter (an injected clock, a test time offset).
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    stamp, stamp_params = _pg_stamp(stamp, now)
    quote = connection.ops.quote_name
    claim_table = quote(Claim._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    request_table = quote(UpdateRequest._meta.db_table)
    parts = [
        f"WITH rel AS (UPDATE {claim_table} SET holder_id = NULL, claimed_at = NULL, "
        "released_at = NULL "
        "WHERE workflow_id = %s AND holder_id = %s AND epoch = %s RETURNING 1)"
    ]
    params: list[Any] = [workflow_id, engine_id, epoch]
    _pg_add_events(connection, parts, params, rows, "rel")
    parts.append(
        f"fin AS (UPDATE {run_table} SET status = %s, result = %s::jsonb, error = %s::jsonb, "
        f"waiting_on = NULL, wake_at = NULL, wake_hint_at = NULL, updated_at = {stamp}, "
        f"started_at = COALESCE(started_at, {stamp}), finished_at = {stamp} "
        "WHERE id = %s AND EXISTS (SELECT 1 FROM rel))"
    )
    params.extend([status, result_json, error_json, *stamp_params * 3, workflow_id])
    parts.append(
        f"req AS (UPDATE {request_table} SET status = 'rejected', error = %s::jsonb, "
        f"responded_at = {stamp}, expires_at = {stamp} + %s * interval '1 second' "
        "WHERE run_id = %s AND status IN ('pending', 'delivered') "
        "AND EXISTS (SELECT 1 FROM rel))"
    )
    params.extend(
        [
            json.dumps({"type": "WorkflowTerminal", "message": f"the run is {status}"}),
            *stamp_params,
            *stamp_params,
            response_ttl,
            workflow_id,
        ]
    )
    if parent_id:
        parts.append(
            f"par AS (UPDATE {run_table} SET wake_hint_at = {stamp} "
            "WHERE id = %s AND EXISTS (SELECT 1 FROM rel))"
        )
        params.extend([*stamp_params, parent_id])
    sql = ", ".join(parts) + " SELECT count(*) FROM rel"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        released = cursor.fetchone()[0]
    return released == 1


def fenced_park(
    using: str,
    *,
    workflow_id: str,
    engine_id: str,
    epoch: int,
    rows: list[tuple[Any, ...]],
    waiting_on_json: str,
    wake_at: datetime | None,
    stamp: str | None,
    now: Callable[[], datetime],
    hint_seen: datetime | None = None,
) -> bool | None:
    """Park a run as one statement (PostgreSQL; None elsewhere): prove the claim
    (``FOR SHARE``, as :func:`fenced_insert`), insert the turn's last events and
    move the run to ``waiting`` on ``waiting_on_json`` until ``wake_at``, all only
    if the claim holds. Its wake hint is cleared only if it is still
    ``hint_seen``, the one the turn answered: a signal that arrived during the
    turn still wakes the run. Returns True when parked, False when this engine
    no longer holds the claim at ``epoch``.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    stamp, stamp_params = _pg_stamp(stamp, now)
    quote = connection.ops.quote_name
    run_table = quote(WorkflowRun._meta.db_table)
    parts = [_pg_fence_cte(connection)]
    params: list[Any] = [workflow_id, engine_id, epoch]
    _pg_add_events(connection, parts, params, rows, "fence")
    clear = ""
    if hint_seen is not None:
        clear = ", wake_hint_at = CASE WHEN wake_hint_at = %s THEN NULL ELSE wake_hint_at END"
    parts.append(
        f"park AS (UPDATE {run_table} SET status = 'waiting', waiting_on = %s::jsonb, "
        f"wake_at = %s, updated_at = {stamp}, started_at = COALESCE(started_at, {stamp})"
        f"{clear} WHERE id = %s AND EXISTS (SELECT 1 FROM fence))"
    )
    params.extend([waiting_on_json, wake_at, *stamp_params * 2])
    if hint_seen is not None:
        params.append(hint_seen)
    params.append(workflow_id)
    sql = ", ".join(parts) + " SELECT count(*) FROM fence"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        held = cursor.fetchone()[0]
    return held == 1
