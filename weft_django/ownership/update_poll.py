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
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Protocol

from ..models import UpdateRequest, UpdateStatus, db_for
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


def runs_with_pending_updates(run_ids: list[str], *, using: str | None = None) -> set[str]:
    """The probe itself: which of ``run_ids`` have a pending request (one query)."""
    return set(
        UpdateRequest.objects.using(db_for(using))
        .filter(run_id__in=run_ids, status=UpdateStatus.PENDING)
        .values_list("run_id", flat=True)
        .distinct()
    )


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
