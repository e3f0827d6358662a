"""What the renewal loop's passes report: one outcome vocabulary and one result type.

Every pass (renew, reclaim, signal poll, update poll, in a worker or a Celery
task) returns a :class:`PassResult` whose per-run outcomes are
:class:`Outcome` members, and every claim transition result carries one too,
so metrics, logs, the admin and tests all speak the same words.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from time import monotonic
from typing import Any


class Outcome(enum.StrEnum):
    # claim transitions (weft_django.ownership.claims.results)
    ACQUIRED = "acquired"
    LOST_RACE = "lost_race"
    NOT_EXPIRED = "not_expired"
    BACKOFF_SKIPPED = "backoff_skipped"
    LOST = "lost"
    NOT_HELD = "not_held"
    RELEASED = "released"
    # pass 1, renew
    RENEWED = "renewed"
    FAILED = "failed"
    # pass 2, reclaim
    RECLAIMED = "reclaimed"
    NOT_ELIGIBLE = "not_eligible"
    BUSY = "busy"  # the holder's open transaction locks the run: retried next pass
    ERROR = "error"
    # pass 3, signal poll
    WOKEN = "woken"
    NOT_BUFFERED = "not_buffered"
    WAKE_FAILED = "wake_failed"
    # pass 4, update poll
    DRAINED = "drained"
    NO_PENDING_UPDATES = "no_pending_updates"
    DRAIN_FAILED = "drain_failed"
    # the store-wide passes of a short-lived engine (Celery beat tasks)
    OWNER_NOTIFIED = "owner_notified"
    HINT_LEFT = "hint_left"
    DEFERRED = "deferred"


@dataclass
class PassResult:
    """What one pass did. ``outcomes`` keeps iteration order (run id -> outcome)."""

    name: str
    started_at: datetime
    finished_at: datetime | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: False when the pass could not do its job as a whole (renew: the engine's
    #: own lease was not extended).
    succeeded: bool = True
    _began: float = field(default_factory=monotonic, repr=False, compare=False)
    #: The counts of a :meth:`compact` result, whose per-run outcomes were dropped.
    _counts: dict[str, int] | None = field(default=None, repr=False, compare=False)
    #: Outcomes counted without a run id each (:meth:`tally`).
    tallies: dict[str, int] = field(default_factory=dict)

    def done(self) -> PassResult:
        """Stamp ``finished_at``: ``started_at`` (a database time) plus the
        monotonic time the pass took, so one clock reading serves the whole pass."""
        self.finished_at = self.started_at + timedelta(seconds=monotonic() - self._began)
        return self

    def record(self, run_id: str, outcome: Outcome, error: BaseException | None = None) -> None:
        self.outcomes[run_id] = outcome
        if error is not None:
            self.errors[run_id] = f"{type(error).__name__}: {error}"

    def tally(self, outcome: Outcome, count: int) -> None:
        """Count ``count`` runs as ``outcome`` without listing them (a pass that
        reads only the runs something happens to, e.g. the signal poll's
        ``not_buffered``: listing the others would cost a read of each)."""
        if count > 0:
            self.tallies[str(outcome)] = self.tallies.get(str(outcome), 0) + count

    @property
    def counts(self) -> Counter[str]:
        if self._counts is not None:
            return Counter(self._counts)
        counts = Counter(str(outcome) for outcome in self.outcomes.values())
        counts.update(self.tallies)
        return counts

    def compact(self, keep: int = 1000, *, max_failures: int = 100) -> PassResult:
        """This result as a long-lived host remembers it: with more than ``keep``
        per-run outcomes, a copy that keeps the counts and the first
        ``max_failures`` errors only (a pass over 100,000 held runs would
        otherwise pin 100,000 entries until the next one)."""
        if len(self.outcomes) <= keep:
            return self
        return dataclasses.replace(
            self,
            outcomes={},
            errors=dict(list(self.errors.items())[:max_failures]),
            _counts=dict(self.counts),
        )

    def count(self, outcome: Outcome) -> int:
        return self.counts.get(str(outcome), 0)

    @property
    def seconds(self) -> float:
        if self.finished_at is None:
            return 0.0
        return (self.finished_at - self.started_at).total_seconds()

    def summary(self, engine_id: str = "", *, max_failures: int = 100) -> dict[str, Any]:
        """A JSON-able summary: times, counts per outcome, and the failures (run id,
        error type, message; at most ``max_failures`` of them)."""
        failures = []
        for run_id, error in list(self.errors.items())[:max_failures]:
            kind, _, message = error.partition(": ")
            failures.append({"run_id": run_id, "error_type": kind, "message": message})
        return {
            "pass": self.name,
            "engine_id": engine_id,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "seconds": round(self.seconds, 4),
            "succeeded": self.succeeded,
            "counts": dict(self.counts),
            "failures": failures,
        }
