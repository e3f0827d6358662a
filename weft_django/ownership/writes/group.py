"""Group commit: the fenced writes of one engine's concurrent turns, one statement.

A step checkpoint and a park are each one fenced statement
(:func:`.single.fenced_write_many`): prove the claim, insert the turn's
events, and for a park move the run to ``waiting``. When
many turns write at once (a burst of new runs that park, a worker's threads
each running steps), each of those statements is its own commit, and the
database spends much of its time on their per-statement and per-commit work.
:class:`GroupCommit` gathers the writes that arrive while one is being
written and writes them together, in one statement and one commit
(:func:`fenced_write_many`), each run still fenced by its own claim and
epoch: a deposed run in the group gets none of its writes, and its turn is
told so, as when it writes alone.

A write that finds no group being written goes out at once, alone: grouping
never makes a turn wait for company, only for the write already under way.
The first turn of a group writes it on its own database connection (the
leader); the others wait for its outcome; when it is done, the first write
that arrived meanwhile leads the next group. One group at a time: two
written at once make smaller groups and fewer steps per second. An error of
the group's statement is every member's error (nothing of it was committed):
each turn is abandoned and retried, as after a failed write of its own.

PostgreSQL only (elsewhere each write is a statement or a transaction of
its own, :mod:`.fence`).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from django.db import DatabaseError

from .single import FencedWrite, fenced_write_many

#: At most this many writes in one statement.
MAX_GROUP = 64


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

    def write(self, request: FencedWrite) -> bool:
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
        self._write(slot)
        return slot.outcome()

    def _write(self, own: _Slot) -> None:
        """As leader: write this write and those queued, then hand over."""
        with self._lock:
            more = min(self.max_group - 1, len(self._queue))
            group = [own, *(self._queue.popleft() for _ in range(more))]
        try:
            written = fenced_write_many(
                self.using,
                engine_id=self.engine_id,
                requests=[slot.request for slot in group],
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
