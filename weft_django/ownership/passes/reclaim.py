"""Pass 2 in mode ``workflow-lease``, the reclaim scan: collect the runs of crashed
or departed engines (and :func:`acquire_stranded`, its acquisition rules, which
the store-wide passes of a Celery task use too).

Candidates are (a) claims whose holder's lease has expired on the database
clock and (b) started runs with no holder at all. For (b) a pass reads the
claims let go of before their run ended (``Claim.released_at``, a partial
index: its cost follows the ownerless runs, not the started ones); every
:data:`FULL_SWEEP_INTERVAL` seconds, on an engine's first pass, and always on
MySQL/MariaDB (no partial indexes) it sweeps all started runs instead, which
also finds started runs with no claim row at all (e.g. after a switch from
mode ``lease``). Only runs whose workflow
type is in ``names`` (registered in this process) are taken. They are taken
in batches, one conditional UPDATE per batch (:mod:`.takeover`); what a batch
cannot take (no claim row yet, or a race on SQLite) is taken one run at a
time with up to 5 acquire/takeover attempts. After winning, each run is
re-confirmed non-terminal (else released); a claim won while the engine is
disposing is released at once. A run with something to do (left running or
pending, a wake hint, a due timer) is handed to ``drive``; a parked run with
nothing due is held without a turn (its turn would only park it again). A
drive that fails keeps the claim: the host retries it on later passes, it is
never released on failure.

Released runs that are due are taken sooner, by the fast tick
(:func:`take_due`, from the tick's own query off the wake indexes): the pass
is the backstop for those, and the only path for released runs with nothing
due (docs/ownership.md, "The release rule").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import DatabaseError

from ..claims.results import Acquired, BackoffSkipped, Busy, LostRace, NotExpired
from ..claims.served import Served
from . import scans, takeover
from .outcomes import Outcome, PassResult
from .takeover import settle as _settle

if TYPE_CHECKING:
    from ..claims.registry import ClaimRegistry

logger = logging.getLogger("weft_django.reclaim")

MAX_ATTEMPTS = 5

#: A batch that took more runs than this is logged in one line, not one per run.
LISTED = 10

#: Seconds between an engine's full sweeps of the started runs (see above).
FULL_SWEEP_INTERVAL = 600.0


def reclaim_scan(
    claims: ClaimRegistry,
    *,
    names: Collection[str],
    drive: Callable[[str], object],
    limit: int = takeover.BATCH,
    max_attempts: int = MAX_ATTEMPTS,
    budget: float | None = None,
) -> PassResult:
    """One pass, in batches of ``limit`` claims (see :mod:`.takeover`): first the
    claims of expired holders, then ownerless started runs. It stops taking new
    batches after ``budget`` seconds (default: 4 x the renew interval) and the
    next pass carries on. The renewal has its own thread, so a long pass never
    makes it late; the signal and update polls that follow on this thread wait
    (wake hints and ``NOTIFY`` still reach the runs held meanwhile)."""
    now = claims.now()
    result = PassResult("reclaim", started_at=now)
    names = names if isinstance(names, Served) else list(names)  # Served: versions too
    if not names:
        return result.done()
    clock = takeover.Budget(claims.timing.renew_interval * 4 if budget is None else budget)
    scan = _Scan(claims, names, drive, result, max_attempts, now=now, clock=clock, limit=limit)
    cutoff = claims.timing.cutoff(now)
    sweep = takeover.SWEEPS.setdefault(claims, {})
    try:
        for holder_id in takeover.expired_engines(claims, cutoff):
            cursor: str | None = ""
            while cursor is not None and not claims.disposing and not clock.spent():
                batch, cursor = takeover.take_from_expired(
                    claims, holder_id, cutoff, names, now, after=cursor, limit=limit
                )
                scan.finish(batch, taken_over=True)
        if _full_sweep_due(claims, sweep):
            scan.sweep_started(sweep)
        else:
            scan.sweep_released(sweep)
    except DatabaseError as exc:
        logger.warning("reclaim pass stopped early: %s", exc)
    return result.done()


def take_due(
    claims: ClaimRegistry, run_ids: list[str], names: Collection[str], now: datetime
) -> list[str]:
    """The fast tick's share of the reclaim: take released runs that are due (a
    wake hint, a due timer: found by the tick's own query, :func:`.scans.woken`)
    in one batch, by the same rules as the released page of a pass (claims
    still without a holder, locked, their runs re-read under the locks, moved
    in one conditional UPDATE, epoch + 1; none while disposing). Returns the ids
    won, each with a turn due; what the batch could not take is left to the
    next tick or pass."""
    if not run_ids or claims.disposing:
        return []
    batch = takeover.take_ownerless(claims, run_ids, names, now)
    if batch.busy:
        logger.debug("the tick found released runs locked; retried next tick")
    return list(_settle(claims, batch, takeover=False).kept)


def _full_sweep_due(claims: ClaimRegistry, sweep: dict[str, str]) -> bool:
    if not scans.partial_indexes(claims.using):
        return True
    if any(sweep.get(status) for status in takeover.STARTED):
        return True  # a full sweep is under way: carry on
    last = takeover.FULL_SWEPT.get(claims)
    return last is None or time.monotonic() - last >= FULL_SWEEP_INTERVAL


class _Scan:
    """Book-keeping of one reclaim pass: adopt, drive and record each batch."""

    def __init__(
        self,
        claims: ClaimRegistry,
        names: Collection[str],
        drive: Callable[[str], object],
        result: PassResult,
        max_attempts: int,
        *,
        now: datetime,
        clock: takeover.Budget,
        limit: int,
    ) -> None:
        self.claims = claims
        self.names = names
        self.drive = drive
        self.result = result
        self.max_attempts = max_attempts
        self.now = now
        self.clock = clock
        self.limit = limit

    def _more(self) -> bool:
        """Whether this pass may take another page."""
        return not self.claims.disposing and not self.clock.spent()

    def sweep_started(self, sweep: dict[str, str]) -> None:
        """The full sweep: every started run, by status, in pages, carrying on
        from where the last pass stopped (``sweep``)."""
        claims, names = self.claims, self.names
        ended = True
        for status in takeover.STARTED:
            after: str | None = sweep.get(status, "")
            while after is not None and self._more():
                free, no_row, after = takeover.ownerless_page(
                    names, status, after=after, limit=self.limit, using=claims.using
                )
                batch = takeover.take_ownerless(claims, free, names, self.now)
                batch.fallback += no_row
                self.finish(batch, taken_over=False)
            # Where this pass stopped (None: the sweep ended; the next starts over).
            sweep[status] = after or ""
            ended = ended and after is None
        if ended:
            takeover.FULL_SWEPT[claims] = time.monotonic()

    def sweep_released(self, sweep: dict[str, str]) -> None:
        """The claims let go of before their run ended, in pages."""
        claims, names = self.claims, self.names
        after: str | None = sweep.get("released", "")
        while after is not None and self._more():
            free, after = takeover.released_page(
                names, after=after, limit=self.limit, using=claims.using
            )
            self.finish(takeover.take_ownerless(claims, free, names, self.now), taken_over=False)
        sweep["released"] = after or ""

    def finish(self, batch: takeover.Batch, *, taken_over: bool) -> None:
        record = self.result.record
        if batch.busy:
            logger.info("a reclaim batch found its rows locked; retried next pass")
        settled = _settle(self.claims, batch, takeover=taken_over)
        if settled.kept:
            log_taken(batch.holder_id, {run_id: batch.won[run_id] for run_id in settled.kept})
        for run_id, due in settled.kept.items():
            if due:
                self.drive(run_id)
            record(run_id, Outcome.RECLAIMED)
        for run_id in settled.released:
            record(run_id, Outcome.NOT_ELIGIBLE)  # won while disposing: released at once
        for run_id in batch.skipped:
            record(run_id, Outcome.BACKOFF_SKIPPED)
        for run_id in batch.lost:
            record(run_id, Outcome.LOST_RACE)
        if batch.fallback:
            self._one_by_one(batch.fallback)

    def _one_by_one(self, run_ids: list[str]) -> None:
        """The one-run transitions, for what a batch could not take."""
        types = scans.workflow_names(run_ids, using=self.claims.using)
        for run_id in run_ids:
            if self.claims.disposing:
                break
            try:
                outcome = acquire_stranded(
                    self.claims,
                    run_id,
                    workflow_name=types.get(run_id),
                    names=self.names,
                    max_attempts=self.max_attempts,
                )
                if outcome is Outcome.ACQUIRED:
                    self.drive(run_id)
                    outcome = Outcome.RECLAIMED
                elif outcome is Outcome.NOT_EXPIRED:
                    outcome = Outcome.LOST_RACE
                self.result.record(run_id, outcome)
            except DatabaseError as exc:
                logger.warning("reclaim of %s failed: %s", run_id, exc)
                self.result.record(run_id, Outcome.ERROR, exc)


def log_taken(holder_id: str | None, won: dict[str, int], *, listed: int = LISTED) -> None:
    """One INFO line per run taken (run, from which engine, new epoch), or one for
    the whole batch when it took more than ``listed``."""
    source = f"engine {holder_id}" if holder_id else "no holder (released or never claimed)"
    verb = "took over" if holder_id else "reclaimed"
    if len(won) > listed:
        low, high = min(won.values()), max(won.values())
        epochs = str(low) if low == high else f"{low}..{high}"
        logger.info("%s %d runs from %s (epochs %s)", verb, len(won), source, epochs)
        return
    for run_id, epoch in won.items():
        logger.info("%s run %s from %s at epoch %d", verb, run_id, source, epoch)


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
        # Not wanted by the default test: the run ended. A caller's own test
        # (a Celery pass's) says nothing about that, so the claim is stamped.
        claims.release(run_id, ended=not wanted and still_wanted is None)
        return Outcome.LOST_RACE if not wanted else Outcome.NOT_ELIGIBLE
    return Outcome.ACQUIRED
