"""Fenced writes as single statements (internal): the fence inside the write.

Where :func:`.fence.fenced` proves the claim with a locking read and then
writes in the same transaction, these statements carry the proof themselves:
the claim's check (holder and epoch, its row locked to commit) or its
conditional release gates every other part of the statement, so the writes
commit only under the claim, in one round trip. Each takes a
:class:`~.requests.Fence` and a request (:mod:`.requests`) and answers True
(written) or False (the fence did not hold: nothing written); a database
without the form raises :class:`~.requests.NoOneStatementForm`.

- :func:`fenced_insert`: a step's :class:`~.requests.Checkpoint`, on every
  database that has the form.
- PostgreSQL: the checkpoints and parks of one run or of a group
  (:func:`fenced_write_many`, :class:`FencedWrite`), the terminal commit
  (:func:`fenced_finish`), both through :func:`.cursor.hot_cursor`; and the
  CTE pieces (:func:`fence_cte`, :func:`events_cte`, :func:`add_events`) that
  :mod:`.wake` shares.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections

from ...flow.slots import free_sql
from ...models import Claim, UpdateRequest, WorkflowEvent, WorkflowRun
from ..claims.release import ENDED_SQL as RELEASED_ENDED
from .cursor import hot_cursor
from .requests import (
    EVENT_COLUMNS,
    Checkpoint,
    EventRow,
    Fence,
    Finish,
    Form,
    NoOneStatementForm,
    Park,
)


def fenced_insert(using: str, fence: Fence, checkpoint: Checkpoint) -> bool:
    """Insert a checkpoint's event rows *and* prove ``fence`` in one statement
    (one round trip): True when inserted, False when the engine no longer holds
    the run at its epoch (nothing was inserted).

    ``checkpoint.mark_running`` also moves the run to ``running`` in the same
    statement (PostgreSQL only: :data:`~.requests.Form.CHECKPOINT_RUNNING`).
    The claim check is part of the INSERT: on PostgreSQL a ``FOR SHARE`` lock
    in a CTE, on MySQL/MariaDB a ``LOCK IN SHARE MODE`` join of the claim row
    (a concurrent takeover waits, or we see its result and insert nothing;
    without the lock clause MySQL's INSERT ... SELECT reads the claim as a
    snapshot under READ COMMITTED); on SQLite the statement runs under the
    database's single write lock. A database without the form
    (:func:`~.requests.forms_on`) raises
    :class:`~.requests.NoOneStatementForm`: the caller uses :func:`.fence.fenced`.
    """
    connection = connections[using]
    if connection.vendor == "postgresql":
        request = FencedWrite.of_checkpoint(fence, checkpoint)
        written = fenced_write_many(using, engine_id=fence.engine_id, requests=[request])
        return written == {fence.workflow_id}
    quote = connection.ops.quote_name
    event_table = quote(WorkflowEvent._meta.db_table)
    claim_table = quote(Claim._meta.db_table)
    columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
    rows = checkpoint.rows
    if connection.vendor == "sqlite" and not checkpoint.mark_running:
        one = "(" + ", ".join(["%s"] * len(EVENT_COLUMNS)) + ")"
        sql = (
            f"INSERT INTO {event_table} ({columns}) "
            f"SELECT * FROM (VALUES {', '.join([one] * len(rows))}) "
            f"WHERE EXISTS (SELECT 1 FROM {claim_table} WHERE workflow_id = %s "
            "AND holder_id = %s AND epoch = %s)"
        )
    elif connection.vendor == "mysql" and not checkpoint.mark_running:
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
        raise NoOneStatementForm(checkpoint.form, connection.vendor)
    params = [*_adapted(connection, rows), *fence.params()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        inserted = cursor.rowcount
    if inserted == len(rows):
        return True
    if inserted == 0:
        return False
    raise DatabaseError(f"fenced insert wrote {inserted} of {len(rows)} events")


def _adapted(connection: Any, rows: Sequence[EventRow]) -> Iterator[Any]:
    """Row values as query parameters, datetimes as the backend stores them."""
    for row in rows:
        for value in row:
            if isinstance(value, datetime):
                yield str(connection.ops.adapt_datetimefield_value(value))
            else:
                yield value


def events_cte(connection: Any, rows: Sequence[EventRow], join: str) -> tuple[str, list[Any]]:
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
    connection: Any, parts: list[str], params: list[Any], rows: Sequence[EventRow], join: str
) -> None:
    """Add the CTE ``ins`` for ``rows`` behind their gate (``join``, as for
    :func:`events_cte`) to a statement being built (nothing when there are no
    rows)."""
    if rows:
        sql, values = events_cte(connection, rows, join)
        parts.append(sql)
        params.extend(values)


def fence_cte(connection: Any) -> str:
    """PostgreSQL: the CTE ``fence``, one row while the claim holds (its
    parameters: :meth:`~.requests.Fence.params`), locked ``FOR SHARE`` to commit."""
    claim_table = connection.ops.quote_name(Claim._meta.db_table)
    return (
        f"WITH fence AS (SELECT 1 FROM {claim_table} WHERE workflow_id = %s "
        "AND holder_id = %s AND epoch = %s FOR SHARE)"
    )


def fenced_finish(using: str, fence: Fence, finish: Finish) -> bool:
    """The terminal commit of a run as one statement (PostgreSQL): True when
    ``fence`` held and everything was written, False when nothing was.

    The claim's release (conditional on holder and epoch) *is* the fence: the
    other parts (last events, terminal status, closing open update requests,
    the parent's wake hint) happen only if it released. Elsewhere:
    :class:`~.requests.NoOneStatementForm`.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        raise NoOneStatementForm(Form.FINISH, connection.vendor)
    stamp, stamp_params = finish.stamp.sql_and_params()
    quote = connection.ops.quote_name
    claim_table = quote(Claim._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    request_table = quote(UpdateRequest._meta.db_table)
    parts = [
        f"WITH rel AS (UPDATE {claim_table} SET {RELEASED_ENDED} "
        "WHERE workflow_id = %s AND holder_id = %s AND epoch = %s RETURNING 1)"
    ]
    params: list[Any] = fence.params()
    add_events(connection, parts, params, finish.rows, "CROSS JOIN rel")
    parts.append(
        f"fin AS (UPDATE {run_table} SET status = %s, result = %s::jsonb, error = %s::jsonb, "
        f"waiting_on = NULL, wake_at = NULL, wake_hint_at = NULL, updated_at = {stamp}, "
        f"started_at = COALESCE(started_at, {stamp}), finished_at = {stamp} "
        "WHERE id = %s AND EXISTS (SELECT 1 FROM rel))"
    )
    workflow_id = fence.workflow_id
    params.extend(
        [finish.status, finish.result_json, finish.error_json, *stamp_params * 3, workflow_id]
    )
    parts.append(
        f"req AS (UPDATE {request_table} SET status = 'rejected', error = %s::jsonb, "
        f"responded_at = {stamp}, expires_at = {stamp} + %s * interval '1 second' "
        "WHERE run_id = %s AND status IN ('pending', 'delivered') "
        "AND EXISTS (SELECT 1 FROM rel))"
    )
    params.extend(
        [
            json.dumps({"type": "WorkflowTerminal", "message": f"the run is {finish.status}"}),
            *stamp_params,
            *stamp_params,
            finish.response_ttl,
            workflow_id,
        ]
    )
    if finish.free_slots:  # by run, engine and epoch: only this turn's (fence or not)
        parts.append(
            f"freed AS ({free_sql(connection)} WHERE run_id = %s AND engine_id = %s AND epoch = %s)"
        )
        params.extend(fence.params())
    if finish.parent_id:
        parts.append(
            f"par AS (UPDATE {run_table} SET wake_hint_at = {stamp} "
            "WHERE id = %s AND EXISTS (SELECT 1 FROM rel))"
        )
        params.extend([*stamp_params, finish.parent_id])
    sql = ", ".join(parts) + " SELECT count(*) FROM rel"
    with hot_cursor(connection) as cursor:
        cursor.execute(sql, params)
        released = cursor.fetchone()[0]
    return bool(released == 1)


#: The columns of :func:`write_many_statement`'s VALUES list ``v``: one row
#: per :class:`FencedWrite`, as :meth:`FencedWrite.values`.
V_COLUMNS = (
    "workflow_id",
    "epoch",
    "park",
    "waiting_on",
    "wake_at",
    "hint_seen",
    "running",
    "stamp",
    "free_slots",
)


@dataclass(slots=True)
class FencedWrite:
    """One turn's fenced write on PostgreSQL, a row of the group statement: the
    run and the epoch it is held at (the engine is the statement's), its
    events (rows in :data:`EVENT_COLUMNS` order, JSON encoded as text), and
    either its park (``waiting_on_json`` set: the run moves to ``waiting``
    until ``wake_at``) or a step checkpoint, which may also move the run to
    ``running`` (``mark_running``, with its execution deadline as
    ``wake_at``). ``stamped_at``: the time to stamp the run with, for an
    engine not on the database clock (an injected clock, a test offset);
    None: ``clock_timestamp()``. Built from a request by :meth:`of_checkpoint`
    and :meth:`of_park`. (Not frozen: it is built per write, and a frozen
    dataclass's construction costs several times a plain one's.)"""

    workflow_id: str
    epoch: int
    rows: Sequence[EventRow]
    waiting_on_json: str | None = None
    wake_at: datetime | None = None
    hint_seen: datetime | None = None
    mark_running: bool = False
    stamped_at: datetime | None = None
    free_slots: bool = False

    @classmethod
    def of_checkpoint(cls, fence: Fence, checkpoint: Checkpoint) -> FencedWrite:
        """A checkpoint, stamped ``clock_timestamp()``."""
        return cls(
            fence.workflow_id,
            fence.epoch,
            checkpoint.rows,
            None,
            checkpoint.wake_at,
            None,
            checkpoint.mark_running,
        )

    @classmethod
    def of_park(cls, fence: Fence, park: Park) -> FencedWrite:
        """A park (``now()`` read here when the engine is not on the database clock)."""
        return cls(
            fence.workflow_id,
            fence.epoch,
            park.rows,
            park.waiting_on_json,
            park.wake_at,
            park.hint_seen,
            False,
            park.stamp.value(),
            park.free_slots,
        )

    @property
    def parks(self) -> bool:
        return self.waiting_on_json is not None

    def values(self) -> tuple[Any, ...]:
        """This write's row of ``v``, in :data:`V_COLUMNS` order."""
        return (
            self.workflow_id,
            self.epoch,
            self.parks,
            self.waiting_on_json,
            self.wake_at,
            self.hint_seen,
            self.mark_running,
            self.stamped_at,
            self.free_slots,
        )


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
    (:mod:`.cursor`) plans each shape once."""
    quote = connection.ops.quote_name
    claim_table = quote(Claim._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    params: list[Any] = []
    values = []
    for request in requests:
        values.append(
            "(%s, %s::bigint, %s, %s::jsonb, %s::timestamptz, %s::timestamptz, %s, "
            "%s::timestamptz, %s)"
        )
        params += request.values()
    parts = [
        f"WITH v ({', '.join(V_COLUMNS)}) AS (VALUES {', '.join(values)})",
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
    if any(request.free_slots for request in requests):
        # The turns' flow-control slots, by run, engine and epoch: only their own,
        # whether the fence held or not (a slot of a claim that moved on is free).
        parts.append(
            f"freed AS ({free_sql(connection)} FROM v WHERE v.free_slots "
            "AND s.run_id = v.workflow_id AND s.engine_id = %s AND s.epoch = v.epoch)"
        )
        params.append(engine_id)
    return ", ".join(parts) + " SELECT workflow_id FROM fence", params
