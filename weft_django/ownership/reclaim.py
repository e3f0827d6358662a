"""Pass 2 in mode ``workflow-lease``, the reclaim scan: collect the runs of crashed
or departed engines.

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
from .results import Acquired, BackoffSkipped, Busy, LostRace

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
        if types.get(run_id) not in names:
            result.record(run_id, Outcome.NOT_ELIGIBLE)
            continue
        try:
            result.record(run_id, _reclaim_one(claims, run_id, drive, max_attempts))
        except DatabaseError as exc:
            logger.warning("reclaim of %s failed: %s", run_id, exc)
            result.record(run_id, Outcome.ERROR, exc)
    return result.done()


def _reclaim_one(
    claims: ClaimRegistry, run_id: str, drive: Callable[[str], object], max_attempts: int
) -> Outcome:
    claimed = None
    for _attempt in range(max_attempts):
        claimed = claims.claim(run_id)
        if isinstance(claimed, (Acquired, BackoffSkipped)):
            break
        if not isinstance(claimed, LostRace) or claimed.held_by is not None:
            break  # a live holder (or one that just won): nothing to retry
    if isinstance(claimed, (BackoffSkipped, Busy)):
        return claimed.outcome
    if not isinstance(claimed, Acquired):
        return Outcome.LOST_RACE
    still_active = scans.is_active(run_id, using=claims.using)
    if not still_active or claims.disposing:
        claims.release(run_id)
        return Outcome.LOST_RACE if not still_active else Outcome.NOT_ELIGIBLE
    drive(run_id)
    return Outcome.RECLAIMED
