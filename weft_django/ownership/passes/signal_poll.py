"""Pass 3, the owner-side signal poll: wake held runs whose signal is buffered.

Every run this engine holds that waits on a signal of a name that is buffered
(probed, never consumed) is woken. The query starts from the buffered signals
(a partial index holds only the unconsumed ones) and keeps those whose run
this engine holds and waits on that name, so a pass costs what is buffered,
not what is held: 100,000 parked runs and no signal is one index probe.
Where the database has no partial indexes (MySQL, MariaDB) the held runs are
probed instead, in chunks. A failure to wake one run never stops the others;
the held runs that had nothing to wake them are counted ``not_buffered``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.fields.json import KT, KeyTextTransform

from ...models import RunStatus, WorkflowRun, WorkflowSignal, db_for
from .outcomes import Outcome, PassResult
from .scans import chunks, of_held_runs, partial_indexes

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


def _buffered_for_waiters(using: str) -> QuerySet[WorkflowSignal]:
    """Unconsumed signals whose run waits on a signal of their name (read off
    the partial index of unconsumed signals)."""
    return WorkflowSignal.objects.using(using).filter(
        consumed_at__isnull=True,
        run__status=RunStatus.WAITING,
        run__waiting_on__kind="signal",
        name=KeyTextTransform("name", "run__waiting_on"),
    )


def held_with_buffered_signal(
    holder_id: str | None,
    names: Collection[str],
    *,
    held: Callable[[], list[str]],
    using: str | None = None,
    chunk: int = 2000,
) -> list[str]:
    """The runs held by ``holder_id`` (every started run of ``names`` when None:
    the global lease holds them all) that wait on a signal which is buffered,
    in id order. ``held()`` lists the held runs, for a database without
    partial indexes, which probes them in chunks of ``chunk``."""
    using = db_for(using)
    if not partial_indexes(using):
        found: list[str] = []
        for ids in chunks(held(), chunk):
            waiters = _signal_waiters(using).filter(pk__in=ids, has_signal=True)
            found.extend(waiters.values_list("pk", flat=True))
        return found
    signals = of_held_runs(_buffered_for_waiters(using), holder_id, names)
    return list(signals.order_by("run_id").values_list("run_id", flat=True).distinct())


def signal_stranded(
    names: Collection[str], *, limit: int, using: str | None = None
) -> list[tuple[str, str]]:
    """Store-wide: (run id, workflow name) of runs of ``names`` that wait on a signal
    which is buffered, whoever holds them (the Celery signal poll pass)."""
    using = db_for(using)
    if partial_indexes(using):
        signals = _buffered_for_waiters(using).filter(run__workflow_name__in=list(names))
        rows = signals.order_by("run_id").values_list("run_id", "run__workflow_name").distinct()
        return list(rows[:limit])
    return list(
        _signal_waiters(using)
        .filter(workflow_name__in=list(names), has_signal=True)
        .values_list("pk", "workflow_name")[:limit]
    )


def has_buffered_signal(run_id: str, *, using: str | None = None) -> bool:
    """Whether ``run_id`` still waits on a signal that is buffered (post-win re-check)."""
    return _signal_waiters(using).filter(pk=run_id, has_signal=True).exists()


def signal_poll_pass(
    wakeable: list[str],
    *,
    held: int,
    wake: Callable[[str], None],
    now: datetime,
) -> PassResult:
    """Wake each of ``wakeable`` (held runs with a buffered signal): outcomes
    ``woken`` / ``wake_failed`` per run; the other ``held`` runs are counted
    ``not_buffered``."""
    result = PassResult("signal_poll", started_at=now)
    for run_id in wakeable:
        try:
            wake(run_id)
        except Exception as exc:
            logger.warning("could not wake %s for its signal: %s", run_id, exc)
            result.record(run_id, Outcome.WAKE_FAILED, exc)
        else:
            result.record(run_id, Outcome.WOKEN)
    result.tally(Outcome.NOT_BUFFERED, held - len(wakeable))
    return result.done()
