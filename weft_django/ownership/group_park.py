"""Group commit of parks: the parks of one engine's concurrent turns, one statement.

A turn that parks ends with one fenced statement (:func:`.fence.fenced_park`):
prove the claim, insert the turn's last events, move the run to ``waiting``.
When many turns park at once (a burst of new runs that wait on a signal),
each of those statements is its own commit, and the database spends most of
its time on their per-statement and per-commit work. :class:`GroupPark`
gathers the parks that arrive while one is being written and writes them
together, in one statement and one commit (:func:`fenced_park_many`), each
run still fenced by its own claim and epoch: a deposed run in the group is
simply not parked, and its turn is told so, as before.

A park that finds no other in flight is written at once, alone: grouping
never makes a turn wait for company, only for the write already under way.
The first turn of a group writes it on its own database connection (the
leader); the others wait for its outcome; when it is done, the first park
that arrived meanwhile leads the next group. An error of the group's
statement is every member's error (nothing of it was committed): each turn
is abandoned and retried, as after a failed park of its own.

PostgreSQL only, and only on the database clock (the statement stamps the
runs with ``clock_timestamp()``); elsewhere a park is written alone.
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

#: At most this many parks in one statement.
MAX_GROUP = 64


@dataclass
class ParkRequest:
    """One turn's park: :func:`.fence.fenced_park`'s arguments for one run."""

    workflow_id: str
    epoch: int
    rows: list[tuple[Any, ...]]
    waiting_on_json: str
    wake_at: datetime | None
    hint_seen: datetime | None = None


def fenced_park_many(
    using: str, *, engine_id: str, requests: list[ParkRequest], stamp: str
) -> set[str]:
    """Park ``requests`` as one PostgreSQL statement; the ids parked.

    Each run is parked only if this engine holds its claim at the request's
    epoch (the claim rows locked ``FOR SHARE`` to commit, in id order), with
    the same writes as :func:`.fence.fenced_park`: the turn's last events, the
    run moved to ``waiting``, its wake hint cleared only if it is still the one
    the turn answered. ``stamp`` is the SQL for "now" (``clock_timestamp()``).
    """
    connection = connections[using]
    quote = connection.ops.quote_name
    claim_table = quote(Claim._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    params: list[Any] = []
    values = []
    for request in requests:
        values.append("(%s, %s::bigint, %s::jsonb, %s::timestamptz, %s::timestamptz)")
        params += [
            request.workflow_id,
            request.epoch,
            request.waiting_on_json,
            request.wake_at,
            request.hint_seen,
        ]
    parts = [
        "WITH v (workflow_id, epoch, waiting_on, wake_at, hint_seen) AS "
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
    parts.append(
        f"park AS (UPDATE {run_table} r SET status = 'waiting', waiting_on = v.waiting_on, "
        f"wake_at = v.wake_at, updated_at = {stamp}, "
        f"started_at = COALESCE(r.started_at, {stamp}), "
        "wake_hint_at = CASE WHEN r.wake_hint_at = v.hint_seen THEN NULL "
        "ELSE r.wake_hint_at END "
        "FROM v JOIN fence ON fence.workflow_id = v.workflow_id WHERE r.id = v.workflow_id)"
    )
    sql = ", ".join(parts) + " SELECT workflow_id FROM fence"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {workflow_id for (workflow_id,) in cursor.fetchall()}


@dataclass(eq=False)
class _Slot:
    request: ParkRequest
    ready: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    parked: bool = False
    error: BaseException | None = None

    def outcome(self) -> bool:
        if self.error is not None:
            if isinstance(self.error, DatabaseError):
                raise DatabaseError(f"a grouped park failed: {self.error}") from self.error
            raise self.error
        return self.parked


class GroupPark:
    """The parks of one engine's turns, grouped while one is being written."""

    def __init__(self, using: str, engine_id: str, *, max_group: int = MAX_GROUP) -> None:
        self.using = using
        self.engine_id = engine_id
        self.max_group = max_group
        self._lock = threading.Lock()
        self._queue: deque[_Slot] = deque()
        self._writing = False
        #: Statements written and parks in them (for tests and benchmarks).
        self.groups = 0
        self.parks = 0

    def park(self, request: ParkRequest, *, stamp: str) -> bool:
        """Park ``request`` (alone or with the parks that arrive meanwhile):
        True when parked, False when this engine no longer holds the run at
        its epoch. Errors: the group statement's ``DatabaseError``."""
        slot = _Slot(request)
        with self._lock:
            self._queue.append(slot)
            slot.lead = not self._writing
            self._writing = True
        if not slot.lead:
            slot.ready.wait()
            if not slot.lead:  # written by a leader
                return slot.outcome()
        self._write(stamp)
        return slot.outcome()

    def _write(self, stamp: str) -> None:
        """As leader: write the queued parks (this one first), then hand over."""
        with self._lock:
            group = [self._queue.popleft() for _ in range(min(self.max_group, len(self._queue)))]
        try:
            parked = fenced_park_many(
                self.using,
                engine_id=self.engine_id,
                requests=[slot.request for slot in group],
                stamp=stamp,
            )
            for slot in group:
                slot.parked = slot.request.workflow_id in parked
        except BaseException as exc:
            for slot in group:
                slot.error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._lock:
                self.groups += 1
                self.parks += len(group)
                successor = self._queue[0] if self._queue else None
                if successor is None:
                    self._writing = False
            for slot in group[1:]:
                slot.lead = False
                slot.ready.set()
            if successor is not None:
                successor.lead = True
                successor.ready.set()
