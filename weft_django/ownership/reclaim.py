"""Pass 2 in mode ``workflow-lease``, the reclaim scan: collect the runs of crashed
or departed engines (and :func:`acquire_stranded`, its acquisition rules, which
the store-wide passes of a Celery task use too).

Candidates are (a) claims whose holder's lease has expired on the database
clock and (b) active runs with no holder at all. For each: skip it unless its
workflow type is in ``names`` (registered in this process); up to 5
acquire/takeover attempts; after winning, re-confirm the run is still
non-terminal (else release); a claim won while the engine is disposing is
released at once; then hand the run to ``drive``. A drive that fails keeps
the claim: the host retries it on later passes, it is never released on
failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from django.db import DatabaseError

from . import scans
from .outcomes import Outcome, PassResult
from .results import Acquired, BackoffSkipped, Busy, LostRace, NotExpired

if TYPE_CHECKING:
    from .claims import ClaimRegistry

logger = logging.getLogger("weft_django.reclaim")

MAX_ATTEMPTS = 5


def reclaim_scan(
    claims: ClaimRegistry,
    *,
    names: Collection[str],
    drive: Callable[[str], object],
    limit: int = 500,
    max_attempts: int = MAX_ATTEMPTS,
) -> PassResult:
    now = claims.now()
    result = PassResult("reclaim", started_at=now)
    using = claims.using
    candidates = dict.fromkeys(
        scans.expired_holders(claims.timing.cutoff(now), limit=limit, using=using)
    )
    candidates.update(dict.fromkeys(scans.ownerless_active(limit=limit, using=using)))
    types = scans.workflow_names(list(candidates), using=using)
    for run_id in candidates:
        if claims.disposing:
            break
        try:
            outcome = acquire_stranded(
                claims,
                run_id,
                workflow_name=types.get(run_id),
                names=names,
                max_attempts=max_attempts,
            )
            if outcome is Outcome.ACQUIRED:
                drive(run_id)
                outcome = Outcome.RECLAIMED
            elif outcome is Outcome.NOT_EXPIRED:
                outcome = Outcome.LOST_RACE
            result.record(run_id, outcome)
        except DatabaseError as exc:
            logger.warning("reclaim of %s failed: %s", run_id, exc)
            result.record(run_id, Outcome.ERROR, exc)
    return result.done()


def acquire_stranded(
    claims: ClaimRegistry,
    run_id: str,
    *,
    workflow_name: str | None,
    names: Collection[str],
    max_attempts: int = MAX_ATTEMPTS,
    still_wanted: Callable[[str], bool] | None = None,
) -> Outcome:
    """Take a run no live engine owns, by the reclaim scan's rules.

    Skip it unless ``workflow_name`` is in ``names`` (``not_eligible``); up to
    ``max_attempts`` acquire/takeover attempts; after winning, re-check that the
    run is still wanted, ``still_wanted(run_id)`` (default: still active; a
    caller's own test must imply that), else release: ``lost_race``, someone
    else got there first; a claim won while the engine is
    disposing is released (``not_eligible``). Returns ``acquired`` when this
    engine now holds the run, ``not_expired`` when its holder turned out live,
    ``backoff_skipped`` in the anti-thrash cooldown, ``lost_race`` otherwise.
    """
    if workflow_name not in names:
        return Outcome.NOT_ELIGIBLE
    claimed = None
    for _attempt in range(max_attempts):
        claimed = claims.claim(run_id)
        if isinstance(claimed, (Acquired, BackoffSkipped, NotExpired)):
            break
        if not isinstance(claimed, LostRace) or claimed.held_by is not None:
            break  # a live holder (or one that just won): nothing to retry
    if isinstance(claimed, (BackoffSkipped, NotExpired, Busy)):
        return claimed.outcome
    if not isinstance(claimed, Acquired):
        return Outcome.LOST_RACE
    if still_wanted is None:
        wanted = scans.is_active(run_id, using=claims.using)
    else:
        wanted = still_wanted(run_id)
    if not wanted or claims.disposing:
        claims.release(run_id)
        return Outcome.LOST_RACE if not wanted else Outcome.NOT_ELIGIBLE
    return Outcome.ACQUIRED
