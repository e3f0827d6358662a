"""Pass 3, the owner-side signal poll: wake held runs whose signal is buffered.

For each run this engine holds that waits on a signal, probe (without
consuming) whether a matching signal is buffered; if so, wake it. One query
finds the runs and the answer together. A failure to wake one run never
stops the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.db.models import Exists, OuterRef
from django.db.models.fields.json import KT

from ..models import RunStatus, WorkflowRun, WorkflowSignal, db_for
from .outcomes import Outcome, PassResult

logger = logging.getLogger("weft_django.signal_poll")


def waiting_on_signal(held: list[str], *, using: str | None = None) -> list[tuple[str, bool]]:
    """(run id, has a matching buffered signal) for the held runs waiting on one."""
    if not held:
        return []
    buffered = WorkflowSignal.objects.filter(
        run_id=OuterRef("pk"), name=OuterRef("signal_name"), consumed_at__isnull=True
    )
    rows = (
        WorkflowRun.objects.using(db_for(using))
        .filter(pk__in=held, status=RunStatus.WAITING, waiting_on__kind="signal")
        .annotate(signal_name=KT("waiting_on__name"))
        .annotate(has_signal=Exists(buffered))
        .order_by("pk")
        .values_list("pk", "has_signal")
    )
    return list(rows)


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
