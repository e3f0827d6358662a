"""Pass 4, the owner-side update poll (DESIGN.md §4.4).

Given this engine's held run ids (a snapshot taken at the start of the
pass), probe them for pending update requests without consuming any, and
drain the runs that have some: the drain drives the run to its park point,
where its pending requests are applied in arrival order. A drain failure for
one run never stops the others. The pass talks to the engine only through
an :class:`UpdatePollTarget`, so it can be tested with fakes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from . import metrics

logger = logging.getLogger("weft_django.update_poll")

DRAINED = "drained"
NO_PENDING = "no_pending_updates"
DRAIN_FAILED = "drain_failed"


class UpdatePollTarget(Protocol):
    def held_run_ids(self) -> list[str]:
        """The runs this engine holds now."""

    def runs_with_pending_updates(self, run_ids: list[str]) -> set[str]:
        """Which of ``run_ids`` have at least one pending request (read-only probe)."""

    def drain_updates(self, run_id: str) -> None:
        """Apply the run's pending requests; raise on failure."""


@dataclass(frozen=True)
class UpdatePollOutcome:
    run_id: str
    outcome: str
    error: BaseException | None = None

    def as_dict(self) -> dict[str, str]:
        found = {"run_id": self.run_id, "outcome": self.outcome}
        if self.error is not None:
            found["error"] = f"{type(self.error).__name__}: {self.error}"
        return found


@dataclass
class UpdatePollResult:
    started_at: datetime
    finished_at: datetime | None = None
    outcomes: list[UpdatePollOutcome] = field(default_factory=list)

    @property
    def drained_count(self) -> int:
        return sum(1 for item in self.outcomes if item.outcome == DRAINED)

    def as_dict(self) -> dict[str, object]:
        return {
            "pass": "update_poll",
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "drained_count": self.drained_count,
            "outcomes": [item.as_dict() for item in self.outcomes],
        }


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for index in range(0, len(items), size):
        yield items[index : index + size]


def update_poll_pass(
    target: UpdatePollTarget,
    *,
    clock: Callable[[], datetime],
    chunk: int = 2000,
) -> UpdatePollResult:
    """Run one pass; outcomes are in the snapshot's iteration order."""
    result = UpdatePollResult(started_at=clock())
    held = list(target.held_run_ids())
    for ids in _chunks(held, chunk):
        try:
            pending = target.runs_with_pending_updates(ids)
        except Exception as exc:
            logger.warning("update probe failed for %d run(s): %s", len(ids), exc)
            result.outcomes.extend(UpdatePollOutcome(run_id, DRAIN_FAILED, exc) for run_id in ids)
            continue
        for run_id in ids:
            if run_id not in pending:
                result.outcomes.append(UpdatePollOutcome(run_id, NO_PENDING))
                continue
            try:
                target.drain_updates(run_id)
            except Exception as exc:
                logger.warning("draining updates of %s failed: %s", run_id, exc)
                result.outcomes.append(UpdatePollOutcome(run_id, DRAIN_FAILED, exc))
            else:
                result.outcomes.append(UpdatePollOutcome(run_id, DRAINED))
    result.finished_at = clock()
    for item in result.outcomes:
        metrics.pass_outcomes.labels(pass_name="update_poll", outcome=item.outcome).inc()
    return result
