"""Pass 4, the owner-side update poll (docs/ownership.md, "The renewal loop").

Find the runs this engine holds that have pending update requests, without
consuming any, and drain them: the drain drives the run to its park point,
where its pending requests are applied in arrival order. The query starts
from the pending requests (a partial index holds only those), so a pass
costs what is pending, not what is held; where the database has no partial
indexes (MySQL, MariaDB) the held runs are probed instead, in chunks. A
drain failure for one run never stops the others; the held runs with nothing
pending are counted ``no_pending_updates``. The pass talks to its host only
through an :class:`UpdatePollTarget`, so it can be tested with fakes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Protocol

from django.db.models import Exists, OuterRef, QuerySet

from ...models import RunStatus, UpdateRequest, UpdateStatus, WorkflowRun, db_for
from .outcomes import Outcome, PassResult
from .scans import chunks, of_held_runs, partial_indexes

logger = logging.getLogger("weft_django.update_poll")


class UpdatePollTarget(Protocol):
    """What the pass needs from its host. Errors: any exception from a method is
    recorded as ``drain_failed`` for the runs it concerns; it never ends the pass."""

    def held_count(self) -> int:
        """How many runs this engine holds now."""

    def held_with_pending_updates(self) -> list[str]:
        """The held runs with at least one pending request (a read-only probe)."""

    def drain_updates(self, run_id: str) -> None:
        """Apply the run's pending requests; raise on failure."""


def _pending(using: str | None) -> QuerySet[UpdateRequest]:
    return UpdateRequest.objects.using(db_for(using)).filter(status=UpdateStatus.PENDING)


def held_with_pending_updates(
    holder_id: str | None,
    names: Collection[str],
    *,
    held: Callable[[], list[str]],
    using: str | None = None,
    chunk: int = 2000,
) -> list[str]:
    """The started runs held by ``holder_id`` (every started run of ``names``
    when None: the global lease holds them all) with a pending request, in id
    order. ``held()`` lists the held runs, for a database without partial
    indexes, which probes them in chunks of ``chunk``."""
    using = db_for(using)
    if not partial_indexes(using):
        found: set[str] = set()
        for ids in chunks(held(), chunk):
            found.update(_pending(using).filter(run_id__in=ids).values_list("run_id", flat=True))
        return sorted(found)
    pending = of_held_runs(_pending(using), holder_id, names)
    return list(pending.order_by("run_id").values_list("run_id", flat=True).distinct())


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
    using = db_for(using)
    if partial_indexes(using):
        pending = _pending(using).filter(
            run__status__in=(RunStatus.RUNNING, RunStatus.WAITING),
            run__workflow_name__in=list(names),
        )
        rows = pending.order_by("run_id").values_list("run_id", "run__workflow_name").distinct()
        return list(rows[:limit])
    return list(
        _started_with_pending(using)
        .filter(workflow_name__in=list(names))
        .values_list("pk", "workflow_name")[:limit]
    )


def has_pending_update(run_id: str, *, using: str | None = None) -> bool:
    """Whether started run ``run_id`` still has a pending request (post-win re-check)."""
    return _started_with_pending(using).filter(pk=run_id).exists()


def update_poll_pass(
    target: UpdatePollTarget,
    *,
    clock: Callable[[], datetime],
) -> PassResult:
    """Run one pass: outcomes per drained run, in id order; the other held runs
    counted. A failed probe fails the pass (``succeeded`` False, the error
    under the run id ``*``); the next pass probes again."""
    result = PassResult("update_poll", started_at=clock())
    held = target.held_count()
    try:
        pending = target.held_with_pending_updates()
    except Exception as exc:
        logger.warning("update probe failed: %s", exc)
        result.succeeded = False
        result.errors["*"] = f"{type(exc).__name__}: {exc}"
        return result.done()
    for run_id in pending:
        try:
            target.drain_updates(run_id)
        except Exception as exc:
            logger.warning("draining updates of %s failed: %s", run_id, exc)
            result.record(run_id, Outcome.DRAIN_FAILED, exc)
        else:
            result.record(run_id, Outcome.DRAINED)
    result.tally(Outcome.NO_PENDING_UPDATES, held - len(pending))
    return result.done()
