"""The Celery beat tasks (docs/celery.md): ``weft_django.signal_poll_pass`` and
``weft_django.update_poll_pass``.

Celery's ``autodiscover_tasks()`` imports this module in Celery processes; it
is the only module of weft_django that imports Celery, so everything else
works without the ``celery`` extra. Each task runs one store-wide pass as a
short-lived engine (:mod:`weft_django.runtime.store_passes`), logs one line
and returns the pass's JSON-able summary. Arguments and results are JSON.
"""

from __future__ import annotations

import logging
from typing import Any

from .exceptions import WeftConfigurationError

try:
    from celery import shared_task
except ImportError as exc:
    raise WeftConfigurationError(
        "weft_django.tasks needs Celery: install the extra, pip install 'weft-django[celery]'."
    ) from exc

from .conf import PassLimits
from .runtime.store_passes import SIGNAL_POLL, UPDATE_POLL, StoreScan, run_store_pass

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
