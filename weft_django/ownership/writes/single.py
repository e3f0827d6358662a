"""Fenced writes as single statements (internal): the fence inside the write.

Where :func:`.fence.fenced` proves the claim with a locking read and then
writes in the same transaction, these statements carry the proof themselves:
the claim's check (holder and epoch, its row locked to commit) or its
conditional release gates every other part of the statement, so the writes
commit only under the claim, in one round trip.

- :func:`fenced_insert`: a step's checkpoint (events as rows of
  :data:`EVENT_COLUMNS`), on every database that has the form.
- PostgreSQL: the checkpoints and parks of one run or of a group
  (:func:`fenced_write_many`, :class:`FencedWrite`), the terminal commit
  (:func:`fenced_finish`), both through :func:`.statements.hot_cursor`; and
  the CTE pieces (:func:`fence_cte`, :func:`events_cte`, :func:`stamp_sql`)
  that :mod:`.wake_writes` shares.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections

from ...models import Claim, UpdateRequest, WorkflowEvent, WorkflowRun
from ..claims.release import ENDED_SQL as RELEASED_ENDED
from .cursor import hot_cursor

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
    if connection.vendor == "postgresql":
        request = FencedWrite(
            workflow_id,
            epoch,
            rows,
            wake_at=None if mark_running is None else mark_running[1],
            mark_running=mark_running is not None,
        )
        return fenced_write_many(using, engine_id=engine_id, requests=[request]) == {workflow_id}
    if connection.vendor == "sqlite" and mark_running is None:
        one = "(" + ", ".join(["%s"] * len(EVENT_COLUMNS)) + ")"
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
        sql = (
            f"INSERT INTO {event_table} ({columns}) "
            f"SELECT v.* FROM (SELECT {first}{more * (len(rows) - 1)}) AS v "
            f"CROSS JOIN {claim_table} AS fence WHERE fence.workflow_id = %s "
            "AND fence.holder_id = %s AND fence.epoch = %s LOCK IN SHARE MODE"
        )
    else:
        return None
    params = [*_adapted(connection, rows), workflow_id, engine_id, epoch]
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


def events_cte(connection: Any, rows: list[tuple[Any, ...]], join: str) -> tuple[str, list[Any]]:
    """PostgreSQL: the CTE ``ins`` inserting ``rows`` (EVENT_COLUMNS order, the
    VALUES aliased ``e``) joined to their gate by ``join``: ``CROSS JOIN rel``
    inserts them only when the CTE ``rel`` has a row, ``JOIN fence ON
    fence.workflow_id = e.run_id`` only the rows of the runs ``fence`` holds.
    Its SQL and parameters."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
    one = "(%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s)"
    sql = (
        f"ins AS (INSERT INTO {quote(WorkflowEvent._meta.db_table)} ({columns}) SELECT e.* "
        f"FROM (VALUES {', '.join([one] * len(rows))}) AS e ({columns}) {join})"
    )
    return sql, [value for row in rows for value in row]


def add_events(
    connection: Any, parts: list[str], params: list[Any], rows: list[tuple[Any, ...]], join: str
) -> None:
    """Add the CTE ``ins`` for ``rows`` behind their gate (``join``, as for
    :func:`events_cte`) to a statement being built (nothing when there are no
    rows)."""
    if rows:
        sql, values = events_cte(connection, rows, join)
        parts.append(sql)
        params.extend(values)


def fence_cte(connection: Any) -> str:
    """PostgreSQL: the CTE ``fence``, one row while the claim holds (workflow id,
    engine id and epoch as parameters), locked ``FOR SHARE`` to commit."""
    claim_table = connection.ops.quote_name(Claim._meta.db_table)
    return (
        f"WITH fence AS (SELECT 1 FROM {claim_table} WHERE workflow_id = %s "
        "AND holder_id = %s AND epoch = %s FOR SHARE)"
    )


def stamp_sql(stamp: str | None, now: Callable[[], datetime]) -> tuple[str, list[Any]]:
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
    stamp, stamp_params = stamp_sql(stamp, now)
    quote = connection.ops.quote_name
    claim_table = quote(Claim._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    request_table = quote(UpdateRequest._meta.db_table)
    parts = [
        f"WITH rel AS (UPDATE {claim_table} SET {RELEASED_ENDED} "
        "WHERE workflow_id = %s AND holder_id = %s AND epoch = %s RETURNING 1)"
    ]
    params: list[Any] = [workflow_id, engine_id, epoch]
    add_events(connection, parts, params, rows, "CROSS JOIN rel")
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
    with hot_cursor(connection) as cursor:
        cursor.execute(sql, params)
        released = cursor.fetchone()[0]
    return released == 1


@dataclass
class FencedWrite:
    """One turn's fenced write on PostgreSQL: its events (rows in
    :data:`EVENT_COLUMNS` order, JSON encoded as text), and either its park
    (``waiting_on_json`` set: the run moves to ``waiting`` until ``wake_at``)
    or a step checkpoint, which may also move the run to ``running``
    (``mark_running``, with its execution deadline as ``wake_at``).
    ``stamped_at``: the time to stamp the run with, for an engine not on the
    database clock (an injected clock, a test offset); None:
    ``clock_timestamp()``."""

    workflow_id: str
    epoch: int
    rows: list[tuple[Any, ...]]
    waiting_on_json: str | None = None
    wake_at: datetime | None = None
    hint_seen: datetime | None = None
    mark_running: bool = False
    stamped_at: datetime | None = None

    @property
    def parks(self) -> bool:
        return self.waiting_on_json is not None


def fenced_write_many(using: str, *, engine_id: str, requests: list[FencedWrite]) -> set[str]:
    """Write ``requests`` as one PostgreSQL statement; the ids whose claim held.

    Each run's writes happen only if this engine holds its claim at the
    request's epoch (the claim rows locked ``FOR SHARE`` to commit, in id
    order), the same writes as alone: its events; for a park the run moved to
    ``waiting``, its wake hint cleared only if it is still the one the turn
    answered; for a checkpoint that marks the run running, the move to
    ``running``. A single write is this statement with one row in ``v``; the
    parks and checkpoints of concurrent turns are grouped into one by
    :class:`~weft_django.ownership.writes.group.GroupCommit`.
    """
    connection = connections[using]
    sql, params = write_many_statement(connection, engine_id, requests)
    with hot_cursor(connection) as cursor:
        cursor.execute(sql, params)
        return {workflow_id for (workflow_id,) in cursor.fetchall()}


def write_many_statement(
    connection: Any, engine_id: str, requests: list[FencedWrite]
) -> tuple[str, list[Any]]:
    """The SQL and parameters of :func:`fenced_write_many`. The text depends only
    on the number of requests and event rows and on whether any parks or marks
    its run running, so a connection that prepares statements
    (:mod:`.statements`) plans each shape once."""
    quote = connection.ops.quote_name
    claim_table = quote(Claim._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    params: list[Any] = []
    values = []
    for request in requests:
        values.append(
            "(%s, %s::bigint, %s, %s::jsonb, %s::timestamptz, %s::timestamptz, %s, %s::timestamptz)"
        )
        params += [
            request.workflow_id,
            request.epoch,
            request.parks,
            request.waiting_on_json,
            request.wake_at,
            request.hint_seen,
            request.mark_running,
            request.stamped_at,
        ]
    parts = [
        "WITH v (workflow_id, epoch, park, waiting_on, wake_at, hint_seen, running, stamp) AS "
        f"(VALUES {', '.join(values)})",
        # An expression keeps the holder index out of the plan: a prepared
        # statement's generic plan, made without the values, must find each
        # claim by its run's id, never walk every claim the engine holds. The
        # concatenation is NULL for an unheld claim, which equals no engine id
        # (not even ''; COALESCE(holder_id, '') would).
        f"fence AS (SELECT c.workflow_id FROM {claim_table} c JOIN v "
        "ON v.workflow_id = c.workflow_id AND v.epoch = c.epoch "
        "WHERE (c.holder_id || '') = %s ORDER BY c.workflow_id FOR SHARE OF c)",
    ]
    params.append(engine_id)
    rows = [row for request in requests for row in request.rows]
    add_events(connection, parts, params, rows, "JOIN fence ON fence.workflow_id = e.run_id")
    fenced = "FROM v JOIN fence ON fence.workflow_id = v.workflow_id WHERE r.id = v.workflow_id"
    stamp = "COALESCE(v.stamp, clock_timestamp())"
    if any(request.parks for request in requests):
        parts.append(
            f"park AS (UPDATE {run_table} r SET status = 'waiting', waiting_on = v.waiting_on, "
            f"wake_at = v.wake_at, updated_at = {stamp}, "
            f"started_at = COALESCE(r.started_at, {stamp}), "
            "wake_hint_at = CASE WHEN r.wake_hint_at = v.hint_seen THEN NULL "
            f"ELSE r.wake_hint_at END {fenced} AND v.park)"
        )
    if any(request.mark_running for request in requests):
        parts.append(
            f"upd AS (UPDATE {run_table} r SET status = 'running', "
            f"started_at = COALESCE(r.started_at, {stamp}), updated_at = {stamp}, "
            f"waiting_on = NULL, wake_at = v.wake_at {fenced} AND v.running)"
        )
    return ", ".join(parts) + " SELECT workflow_id FROM fence", params
