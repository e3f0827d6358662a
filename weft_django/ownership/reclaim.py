"""Pass 2, the reclaim scan: collect the runs of crashed or departed engines.

Candidates are (a) claims whose holder's lease has expired on the database
clock and (b) active runs with no holder at all. For each: skip it unless
this worker has the workflow type registered; up to 5 acquire/takeover
attempts; after winning, re-confirm the run is still non-terminal (else
release); a claim won while the engine is disposing is released at once;
then hand the run to ``drive``. A drive that fails keeps the claim: the
caller retries it on later passes, it is never released on failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from time import monotonic

from django.db import DatabaseError

from ..models import ACTIVE_STATUSES, WorkflowRun
from ..runtime import registry
from ..runtime.engine import WorkflowEngine
from . import metrics, scans
from .passes import PassResult
from .results import Acquired, BackoffSkipped, LostRace

logger = logging.getLogger("weft_django.reclaim")

MAX_ATTEMPTS = 5


def reclaim_scan(
    engine: WorkflowEngine,
    *,
    drive: Callable[[str], None],
    limit: int = 500,
    max_attempts: int = MAX_ATTEMPTS,
) -> PassResult:
    started = monotonic()
    now = engine.claims.now()
    result = PassResult("reclaim", started_at=now)
    candidates = dict.fromkeys(
        scans.expired_holders(engine.claims.expiry_cutoff(now), limit=limit, using=engine.using)
    )
    candidates.update(dict.fromkeys(scans.ownerless_active(limit=limit, using=engine.using)))
    names = dict(
        WorkflowRun.objects.using(engine.using)
        .filter(pk__in=list(candidates))
        .values_list("pk", "workflow_name")
    )
    for run_id in candidates:
        if engine.stopping.is_set():
            break
        try:
            result.record(
                run_id, _reclaim_one(engine, run_id, names.get(run_id), drive, max_attempts)
            )
        except DatabaseError as exc:
            logger.warning("reclaim of %s failed: %s", run_id, exc)
            result.record(run_id, "error", exc)
    result.finished_at = now + timedelta(seconds=monotonic() - started)
    for outcome, count in result.counts.items():
        metrics.pass_outcomes.labels(pass_name="reclaim", outcome=outcome).inc(count)
    return result


def _reclaim_one(
    engine: WorkflowEngine,
    run_id: str,
    workflow_name: str | None,
    drive: Callable[[str], None],
    max_attempts: int,
) -> str:
    if workflow_name is None or not registry.is_registered(workflow_name):
        return "not_eligible"
    claimed = None
    for _attempt in range(max_attempts):
        claimed = engine.acquire(run_id)
        if isinstance(claimed, (Acquired, BackoffSkipped)):
            break
        if not isinstance(claimed, LostRace) or claimed.held_by is not None:
            break  # a live holder (or one that just won): nothing to retry
    if isinstance(claimed, BackoffSkipped):
        return "backoff_skipped"
    if not isinstance(claimed, Acquired):
        return "lost_race"
    still_active = (
        WorkflowRun.objects.using(engine.using)
        .filter(pk=run_id, status__in=ACTIVE_STATUSES)
        .exists()
    )
    if not still_active or engine.stopping.is_set():
        engine.release(run_id)
        return "lost_race" if not still_active else "not_eligible"
    drive(run_id)
    return "reclaimed"
