"""The intake's order and flow-control budget (docs/flow-control.md).

**Priority** (-100..100, higher first). The intake reads, beside the ready
queue's oldest due runs (its window), a fast lane: the due pending runs of a
*positive* priority, highest first, off their own index
(``weft_run_priority_idx``). The candidates are then claimed in order of
their *effective* priority: their priority plus one point per
:data:`SECONDS_PER_POINT` (1 s) they have been due, then due time. So a
fresh run of priority 100 goes ahead of a priority-0 run that has been due
for less than 100 s, and no run waits behind runs that became due after it
for longer than 200 s (the whole range): the window always holds the oldest
due runs, so each of them reaches the head and ages past any newcomer. That
is the starvation bound: priority orders the runs that are due; due time
bounds how long any of them waits.

**Budget.** A run of a queue with a concurrency limit is only claimed while
that queue (and its key) has a free slot, counting the runs claimed earlier in
the same pickup: a backlog behind a full queue stays in the database, pending
and unclaimed, instead of being claimed and deferred again and again. The
budget is a hint (one read of the slots held per pickup that meets a limited
queue); the turn's own :func:`~weft_django.flow.gate.admit` is what holds
the limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

from ...flow.settings import limits_of
from ...flow.slots import slots_in_use

#: The priority index (models.WorkflowRun.Meta.indexes, migration 0019).
PRIORITY_INDEX = "weft_run_priority_idx"
#: A run gains one point of priority per this many seconds it has been due.
SECONDS_PER_POINT = 1.0


class _Candidate(Protocol):
    run_id: str
    priority: int
    queue: str
    concurrency_key: str | None

    def due_since(self) -> Any: ...


def by_priority(candidates: Iterable[Any], now: datetime) -> list[Any]:
    """``candidates`` in claim order: effective priority (its priority plus a
    point per :data:`SECONDS_PER_POINT` due), then due time, then id."""
    at = _naive_utc(now)

    def order(c: _Candidate) -> tuple[float, Any, str]:
        since = _naive_utc(c.due_since())
        waited = max((at - since).total_seconds(), 0.0) if since is not None else 0.0
        effective = c.priority + waited / SECONDS_PER_POINT
        return (-effective, since or datetime.min, c.run_id)

    return sorted(candidates, key=order)


def _naive_utc(value: Any) -> Any:
    """A timestamp as a naive UTC datetime (a raw cursor gives naive ones on
    SQLite and MariaDB, aware ones on PostgreSQL); other values as they are."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


class FlowBudget:
    """The free slots of the limited queues (and keys), read on first need."""

    def __init__(self, using: str) -> None:
        self.using = using
        self._in_use: dict[tuple[str, str], int] | None = None

    def admits(self, candidate: _Candidate) -> bool:
        """Whether a slot is free for it (counting it as taken when so)."""
        limits = limits_of(candidate.queue or "default")
        if limits is None or (limits.concurrency is None and limits.per_key_concurrency is None):
            return True
        if self._in_use is None:
            self._in_use = slots_in_use(self.using)
        used = self._in_use
        queue, key = limits.name, candidate.concurrency_key
        if limits.concurrency is not None and used.get((queue, ""), 0) >= limits.concurrency:
            return False
        if (
            key
            and limits.per_key_concurrency is not None
            and used.get((queue, key), 0) >= limits.per_key_concurrency
        ):
            return False
        used[(queue, "")] = used.get((queue, ""), 0) + 1
        if key:
            used[(queue, key)] = used.get((queue, key), 0) + 1
        return True
