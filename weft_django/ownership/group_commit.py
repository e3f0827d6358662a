"""Group commit: the fenced writes of one engine's concurrent turns, one statement.

A step checkpoint and a park are each one fenced statement
(:func:`.fence.fenced_insert`, :func:`.fence.fenced_park`): prove the claim,
insert the turn's events, and for a park move the run to ``waiting``. When
many turns write at once (a burst of new runs that park, a worker's threads
each running steps), each of those statements is its own commit, and the
database spends much of its time on their per-statement and per-commit work.
:class:`GroupCommit` gathers the writes that arrive while one is being
written and writes them together, in one statement and one commit
(:func:`fenced_write_many`), each run still fenced by its own claim and
epoch: a deposed run in the group gets none of its writes, and its turn is
told so, as before.

A write that finds no group being written goes out at once, alone: grouping
never makes a turn wait for company, only for the write already under way.
The first turn of a group writes it on its own database connection (the
leader); the others wait for its outcome; when it is done, the first write
that arrived meanwhile leads the next group. One group at a time: letting
two be written at once made smaller groups and fewer steps per second
(``bench/throughput.py``: 2,180-2,270 against 2,430-2,450 steps/s with 4
threads per worker, 3,060-3,230 against 3,290-3,630 with 8). An error of the group's
statement is every member's error (nothing of it was committed): each turn
is abandoned and retried, as after a failed write of its own.

PostgreSQL only, and only on the database clock (the statement stamps the
runs with ``clock_timestamp()``); elsewhere each write goes out alone.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections

from ..models import Claim, WorkflowEvent, WorkflowRun
from .fence import EVENT_COLUMNS

#: At most this many writes in one statement.
MAX_GROUP = 64


@dataclass
class FencedWrite:
    """One turn's fenced write: its events, and either its park (``waiting_on_json``
    set: :func:`.fence.fenced_park`'s arguments) or a step checkpoint, which may
    also move the run to ``running`` (``mark_running``, with its execution
    deadline as ``wake_at``: :func:`.fence.fenced_insert`'s)."""

    workflow_id: str
    epoch: int
    rows: list[tuple[Any, ...]]
    waiting_on_json: str | None = None
    wake_at: datetime | None = None
    hint_seen: datetime | None = None
    mark_running: bool = False

    @property
    def parks(self) -> bool:
        return self.waiting_on_json is not None


def fenced_write_many(
    using: str, *, engine_id: str, requests: list[FencedWrite], stamp: str
) -> set[str]:
    """Write ``requests`` as one PostgreSQL statement; the ids whose claim held.

    Each run's writes happen only if this engine holds its claim at the
    request's epoch (the claim rows locked ``FOR SHARE`` to commit, in id
    order), the same writes as alone: its events; for a park the run moved to
    ``waiting``, its wake hint cleared only if it is still the one the turn
    answered; for a checkpoint that marks the run running, the move to
    ``running``. ``stamp`` is the SQL for "now" (``clock_timestamp()``).
    """
    connection = connections[using]
    quote = connection.ops.quote_name
    claim_table = quote(Claim._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    params: list[Any] = []
    values = []
    for request in requests:
        values.append("(%s, %s::bigint, %s, %s::jsonb, %s::timestamptz, %s::timestamptz, %s)")
        params += [
            request.workflow_id,
            request.epoch,
            request.parks,
            request.waiting_on_json,
            request.wake_at,
            request.hint_seen,
            request.mark_running,
        ]
    parts = [
        "WITH v (workflow_id, epoch, park, waiting_on, wake_at, hint_seen, running) AS "
        f"(VALUES {', '.join(values)})",
        f"fence AS (SELECT c.workflow_id FROM {claim_table} c JOIN v "
        "ON v.workflow_id = c.workflow_id AND v.epoch = c.epoch WHERE c.holder_id = %s "
        "ORDER BY c.workflow_id FOR SHARE OF c)",
    ]
    params.append(engine_id)
    rows = [row for request in requests for row in request.rows]
    if rows:
        columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
        one = "(%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s)"
        parts.append(
            f"ins AS (INSERT INTO {quote(WorkflowEvent._meta.db_table)} ({columns}) "
            f"SELECT e.* FROM (VALUES {', '.join([one] * len(rows))}) AS e ({columns}) "
            "JOIN fence ON fence.workflow_id = e.run_id)"
        )
        params += [value for row in rows for value in row]
    fenced = "FROM v JOIN fence ON fence.workflow_id = v.workflow_id WHERE r.id = v.workflow_id"
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
    sql = ", ".join(parts) + " SELECT workflow_id FROM fence"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {workflow_id for (workflow_id,) in cursor.fetchall()}


@dataclass(eq=False)
class _Slot:
    request: FencedWrite
    ready: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    written: bool = False
    error: BaseException | None = None

    def outcome(self) -> bool:
        if self.error is not None:
            if isinstance(self.error, DatabaseError):
                raise DatabaseError(f"a grouped write failed: {self.error}") from self.error
            raise self.error
        return self.written


class GroupCommit:
    """The fenced writes of one engine's turns, grouped while one is being written."""

    def __init__(self, using: str, engine_id: str, *, max_group: int = MAX_GROUP) -> None:
        self.using = using
        self.engine_id = engine_id
        self.max_group = max_group
        self._lock = threading.Lock()
        self._queue: deque[_Slot] = deque()
        self._writing = False  # a group is being written
        #: Statements written and the writes in them (for tests and benchmarks).
        self.groups = 0
        self.writes = 0

    def write(self, request: FencedWrite, *, stamp: str) -> bool:
        """Write ``request`` (alone or with the writes that arrive meanwhile):
        True when written, False when this engine no longer holds the run at
        its epoch. Errors: the group statement's ``DatabaseError``."""
        slot = _Slot(request)
        with self._lock:
            # The queue is empty unless a group is being written.
            slot.lead = not self._writing
            if slot.lead:
                self._writing = True
            else:
                self._queue.append(slot)
        if not slot.lead:
            slot.ready.wait()
            if not slot.lead:  # written by a leader
                return slot.outcome()
        self._write(slot, stamp)
        return slot.outcome()

    def _write(self, own: _Slot, stamp: str) -> None:
        """As leader: write this write and those queued, then hand over."""
        with self._lock:
            more = min(self.max_group - 1, len(self._queue))
            group = [own, *(self._queue.popleft() for _ in range(more))]
        try:
            written = fenced_write_many(
                self.using,
                engine_id=self.engine_id,
                requests=[slot.request for slot in group],
                stamp=stamp,
            )
            for slot in group:
                slot.written = slot.request.workflow_id in written
        except BaseException as exc:
            for slot in group:
                slot.error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._lock:
                self.groups += 1
                self.writes += len(group)
                # The first write queued leads the next group (taken out of the
                # queue now, so no other leader hands it the lead too).
                successor = self._queue.popleft() if self._queue else None
                if successor is None:
                    self._writing = False
            for slot in group[1:]:
                slot.lead = False
                slot.ready.set()
            if successor is not None:
                successor.lead = True
                successor.ready.set()
