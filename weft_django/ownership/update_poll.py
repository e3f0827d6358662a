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
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..runtime.engine import WorkflowEngine

from ..conf import MODE_LEASE
from ..models import RunStatus, UpdateRequest, UpdateStatus, WorkflowRun
from . import metrics
from .passes import PassResult

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

    def as_pass_result(self) -> PassResult:
        """The same outcomes as the other passes report them."""
        converted = PassResult("update_poll", started_at=self.started_at)
        converted.finished_at = self.finished_at
        for item in self.outcomes:
            converted.record(item.run_id, item.outcome, item.error)
        return converted

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


class EngineUpdateTarget:
    """The pass's view of a live engine: its held runs, probed in one query per
    chunk; a drain schedules a turn of the run on the engine's executor, which
    applies the pending requests at the run's park point."""

    def __init__(
        self,
        engine: WorkflowEngine,
        *,
        schedule: Callable[[str], bool],
        using: str = "default",
    ) -> None:
        self.engine = engine
        self.schedule = schedule
        self.using = using

    def held_run_ids(self) -> list[str]:
        if self.engine.mode == MODE_LEASE:
            return list(
                WorkflowRun.objects.using(self.using)
                .filter(status__in=(RunStatus.RUNNING, RunStatus.WAITING))
                .order_by("pk")
                .values_list("pk", flat=True)
            )
        return sorted(self.engine.claims.held)

    def runs_with_pending_updates(self, run_ids: list[str]) -> set[str]:
        return set(
            UpdateRequest.objects.using(self.using)
            .filter(run_id__in=run_ids, status=UpdateStatus.PENDING)
            .values_list("run_id", flat=True)
            .distinct()
        )

    def drain_updates(self, run_id: str) -> None:
        engine = self.engine
        if engine.stopping.is_set():
            raise RuntimeError("the engine is stopping")
        if engine.mode != MODE_LEASE and not engine.claims.check_wake(run_id, "update"):
            raise RuntimeError(f"{run_id} is no longer held by this engine")
        if not self.schedule(run_id):
            raise RuntimeError(f"could not schedule a turn of {run_id}")
