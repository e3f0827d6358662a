"""Pass 3, the owner-side signal poll: wake held runs whose signal is buffered.

For each run this engine holds that waits on a signal, probe (without
consuming) whether a matching signal is buffered; if so, wake it. One query
finds the runs and the answer together. A failure to wake one run never
stops the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.fields.json import KT

from ..models import RunStatus, WorkflowRun, WorkflowSignal, db_for
from .outcomes import Outcome, PassResult

logger = logging.getLogger("weft_django.signal_poll")


def _signal_waiters(using: str | None) -> QuerySet[Any]:  # annotated: has_signal
    """Waiting runs parked on a signal, each annotated ``has_signal``: whether a
    signal of the awaited name is buffered (probed, never consumed)."""
    buffered = WorkflowSignal.objects.filter(
        run_id=OuterRef("pk"), name=OuterRef("signal_name"), consumed_at__isnull=True
    )
    return (
        WorkflowRun.objects.using(db_for(using))
        .filter(status=RunStatus.WAITING, waiting_on__kind="signal")
        .annotate(signal_name=KT("waiting_on__name"))
        .annotate(has_signal=Exists(buffered))
        .order_by("pk")
    )


def waiting_on_signal(held: list[str], *, using: str | None = None) -> list[tuple[str, bool]]:
    """(run id, has a matching buffered signal) for the held runs waiting on one."""
    if not held:
        return []
    return list(_signal_waiters(using).filter(pk__in=held).values_list("pk", "has_signal"))


def signal_stranded(
    names: Collection[str], *, limit: int, using: str | None = None
) -> list[tuple[str, str]]:
    """Store-wide: (run id, workflow name) of runs of ``names`` that wait on a signal
    which is buffered, whoever holds them (the Celery signal poll pass)."""
    return list(
        _signal_waiters(using)
        .filter(workflow_name__in=list(names), has_signal=True)
        .values_list("pk", "workflow_name")[:limit]
    )


def has_buffered_signal(run_id: str, *, using: str | None = None) -> bool:
    """Whether ``run_id`` still waits on a signal that is buffered (post-win re-check)."""
    return _signal_waiters(using).filter(pk=run_id, has_signal=True).exists()


def signal_poll_pass(
    held: list[str],
    *,
    wake: Callable[[str], None],
    now: datetime,
    using: str | None = None,
    chunk: int = 2000,
) -> PassResult:
    """Outcomes ``woken`` / ``not_buffered`` / ``wake_failed`` per held waiting run."""
    result = PassResult("signal_poll", started_at=now)
    for index in range(0, len(held), chunk):
        for run_id, has_signal in waiting_on_signal(held[index : index + chunk], using=using):
            if not has_signal:
                result.record(run_id, Outcome.NOT_BUFFERED)
                continue
            try:
                wake(run_id)
            except Exception as exc:
                logger.warning("could not wake %s for its signal: %s", run_id, exc)
                result.record(run_id, Outcome.WAKE_FAILED, exc)
            else:
                result.record(run_id, Outcome.WOKEN)
    return result.done()
