"""Pass 4, the owner-side update poll (docs/ownership.md, "The renewal loop").

Given this engine's held run ids (a snapshot taken at the start of the
pass), probe them for pending update requests without consuming any, and
drain the runs that have some: the drain drives the run to its park point,
where its pending requests are applied in arrival order. A drain failure for
one run never stops the others. The pass talks to its host only through an
:class:`UpdatePollTarget`, so it can be tested with fakes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from typing import Protocol

from django.db.models import Exists, OuterRef, QuerySet

from ..models import RunStatus, UpdateRequest, UpdateStatus, WorkflowRun, db_for
from .outcomes import Outcome, PassResult

logger = logging.getLogger("weft_django.update_poll")


class UpdatePollTarget(Protocol):
    """What the pass needs from its host. Errors: any exception from a method is
    recorded as ``drain_failed`` for the runs it concerns; it never ends the pass."""

    def held_run_ids(self) -> list[str]:
        """The runs this engine holds now."""

    def runs_with_pending_updates(self, run_ids: list[str]) -> set[str]:
        """Which of ``run_ids`` have at least one pending request (read-only probe)."""

    def drain_updates(self, run_id: str) -> None:
        """Apply the run's pending requests; raise on failure."""


def _pending(using: str | None) -> QuerySet[UpdateRequest]:
    return UpdateRequest.objects.using(db_for(using)).filter(status=UpdateStatus.PENDING)


def runs_with_pending_updates(run_ids: list[str], *, using: str | None = None) -> set[str]:
    """The probe itself: which of ``run_ids`` have a pending request (one query)."""
    pending = _pending(using).filter(run_id__in=run_ids)
    return set(pending.values_list("run_id", flat=True).distinct())


def _started_with_pending(using: str | None) -> QuerySet[WorkflowRun]:
    pending = UpdateRequest.objects.filter(run_id=OuterRef("pk"), status=UpdateStatus.PENDING)
    return (
        WorkflowRun.objects.using(db_for(using))
        .filter(status__in=(RunStatus.RUNNING, RunStatus.WAITING))
        .filter(Exists(pending))
        .order_by("pk")
    )


def update_stranded(
    names: Collection[str], *, limit: int, using: str | None = None
) -> list[tuple[str, str]]:
    """Store-wide: (run id, workflow name) of started runs of ``names`` with at least
    one pending update request, whoever holds them (the Celery update poll pass)."""
    return list(
        _started_with_pending(using)
        .filter(workflow_name__in=list(names))
        .values_list("pk", "workflow_name")[:limit]
    )


def has_pending_update(run_id: str, *, using: str | None = None) -> bool:
    """Whether started run ``run_id`` still has a pending request (post-win re-check)."""
    return _started_with_pending(using).filter(pk=run_id).exists()


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for index in range(0, len(items), size):
        yield items[index : index + size]


def update_poll_pass(
    target: UpdatePollTarget,
    *,
    clock: Callable[[], datetime],
    chunk: int = 2000,
) -> PassResult:
    """Run one pass; outcomes are in the snapshot's iteration order."""
    result = PassResult("update_poll", started_at=clock())
    held = list(target.held_run_ids())
    for ids in _chunks(held, chunk):
        try:
            pending = target.runs_with_pending_updates(ids)
        except Exception as exc:
            logger.warning("update probe failed for %d run(s): %s", len(ids), exc)
            for run_id in ids:
                result.record(run_id, Outcome.DRAIN_FAILED, exc)
            continue
        for run_id in ids:
            if run_id not in pending:
                result.record(run_id, Outcome.NO_PENDING_UPDATES)
                continue
            try:
                target.drain_updates(run_id)
            except Exception as exc:
                logger.warning("draining updates of %s failed: %s", run_id, exc)
                result.record(run_id, Outcome.DRAIN_FAILED, exc)
            else:
                result.record(run_id, Outcome.DRAINED)
    return result.done()
