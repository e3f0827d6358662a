"""The Celery beat tasks (docs/celery.md): ``weft_django.signal_poll_pass``,
``weft_django.update_poll_pass`` and ``weft_django.prune_pass`` (docs/retention.md).

Celery's ``autodiscover_tasks()`` imports this module in Celery processes; it
is the only module of weft_django that imports Celery, so everything else
works without the ``celery`` extra. Each task runs one store-wide pass as a
short-lived engine (:mod:`weft_django.runtime.passes.store`), logs one line
and returns the pass's JSON-able summary. Arguments and results are JSON. Each
pass upserts its kind's ``PassSummary`` row (:mod:`weft_django.runtime.passes.summaries`),
the "Celery passes" section of the admin overview.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from .exceptions import WeftConfigurationError

try:
    from celery import shared_task
except ImportError as exc:
    raise WeftConfigurationError(
        "weft_django.tasks needs Celery: install the extra, pip install 'weft-django[celery]'."
    ) from exc

from django.utils import timezone

from .conf import PRUNE_BATCH, PassLimits
from .models import PassKind
from .retention.pruner import Pruner
from .runtime.passes.store import SIGNAL_POLL, UPDATE_POLL, StoreScan, run_store_pass
from .runtime.passes.summaries import record_pass

logger = logging.getLogger("weft_django.tasks")

DEFAULT_BATCH = PassLimits.batch_size
DEFAULT_BUDGET = PassLimits.time_budget


def describe(summary: dict[str, Any]) -> str:
    """The one log line of a pass."""
    counts = " ".join(f"{name}={count}" for name, count in sorted(summary["counts"].items()))
    failures = ", ".join(f"{f['run_id']}:{f['error_type']}" for f in summary["failures"])
    return (
        f"{summary['pass']} engine={summary['engine_id']} {summary['seconds']:.3f}s "
        f"{counts or 'nothing to do'}" + (f" failures=[{failures}]" if failures else "")
    )


def _run(scan: StoreScan, batch_size: Any, time_budget: Any) -> dict[str, Any]:
    summary = run_store_pass(scan, PassLimits.of(batch_size, time_budget))
    logger.info("%s", describe(summary))
    return summary


@shared_task(name="weft_django.signal_poll_pass", serializer="json")
def signal_poll_pass(
    batch_size: int = DEFAULT_BATCH, time_budget: float = DEFAULT_BUDGET
) -> dict[str, Any]:
    """Deliver buffered signals store-wide: notify live owners, drain stranded runs."""
    return _run(SIGNAL_POLL, batch_size, time_budget)


@shared_task(name="weft_django.update_poll_pass", serializer="json")
def update_poll_pass(
    batch_size: int = DEFAULT_BATCH, time_budget: float = DEFAULT_BUDGET
) -> dict[str, Any]:
    """Apply pending update requests store-wide: notify live owners, drain stranded runs."""
    return _run(UPDATE_POLL, batch_size, time_budget)


@shared_task(name="weft_django.prune_pass", serializer="json")
def prune_pass(
    batch_size: int = PRUNE_BATCH, time_budget: float = DEFAULT_BUDGET, dry_run: bool = False
) -> dict[str, Any]:
    """Delete finished runs and stopped engines past ``WEFT["RETENTION"]``, in batches
    of ``batch_size`` runs, starting no new batch after ``time_budget`` seconds."""
    if not isinstance(dry_run, bool):
        raise WeftConfigurationError(f"dry_run must be True or False, got {dry_run!r}.")
    began = timezone.now()
    try:
        summary = Pruner(batch_size=batch_size, time_budget=time_budget, dry_run=dry_run).run()
    except Exception as exc:
        record_pass(
            PassKind.PRUNE, started_at=began, finished_at=timezone.now(), counts={}, error=exc
        )
        raise
    result = summary.as_dict()
    record_pass(
        PassKind.PRUNE,
        started_at=summary.started_at,
        finished_at=summary.started_at + timedelta(seconds=summary.seconds),
        counts={**summary.deleted, **{f"skipped_{why}": n for why, n in summary.skipped.items()}},
    )
    deleted = " ".join(f"{table}={count}" for table, count in result["deleted"].items())
    logger.info(
        "prune_pass %s%.3fs %s%s",
        "dry-run " if dry_run else "",
        summary.seconds,
        deleted,
        "" if summary.complete else " (time budget reached)",
    )
    return result
