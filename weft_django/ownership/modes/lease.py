"""Mode ``lease``: one store-wide single-writer lease.

One engine holds the global lease and drives every run; the others stand by
and take it over once it has expired on the database clock. Every write is
fenced on the global lease's epoch, so a deposed holder's next write fails.
Runs are not claimed one by one: holding the lease is owning them all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import datetime

from ...conf import GLOBAL_LEASE, Timing, WeftSettings
from ...models import RunStatus
from ..claims.intake import ready_window
from ..claims.results import Acquired, ClaimResult, LostRace
from ..clock import Clock
from ..leases.store import GlobalLeaseManager
from ..passes import scans
from ..passes.outcomes import Outcome, PassResult
from ..passes.signal_poll import held_with_buffered_signal
from ..passes.update_poll import held_with_pending_updates
from ..writes.fence import fenced_by_global_lease
from ..writes.requests import Fence
from .base import Ownership

logger = logging.getLogger("weft_django.ownership")


class GlobalLeaseOwnership(Ownership):
    name = GLOBAL_LEASE

    def __init__(
        self,
        engine_id: str,
        settings: WeftSettings,
        *,
        using: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(engine_id, settings, using=using, clock=clock)
        self.lease = GlobalLeaseManager(engine_id, self.timing, using=self.using, clock=clock)

    @classmethod
    def timing_of(cls, settings: WeftSettings) -> Timing:
        return settings.lease_timing

    # -- lifecycle ----------------------------------------------------------------

    def renew(self) -> PassResult:
        """Renew the global lease (or take it once it has expired), and the
        engine's own row; a standby's pass reports no runs."""
        had = self.lease.held
        holds = self.lease.renew() if had else False
        if not holds and not self.disposing:
            holds = self.lease.try_acquire()
            if holds:
                logger.info("took the global lease (epoch %s)", self.lease.epoch)
        if had and not holds:
            logger.warning("lost the global lease; standing by")
        renewal = self.claims.renew()
        result = PassResult("renew", started_at=renewal.started_at)
        result.succeeded = renewal.engine_renewed
        result.finished_at = renewal.finished_at
        return result

    def release_all(self) -> int:
        self.lease.release()
        return 0

    # -- one run ------------------------------------------------------------------

    def can_drive(self) -> bool:
        return self.lease.held

    def acquire(self, run_id: str) -> ClaimResult:
        epoch = self.lease.epoch
        if epoch is None or self.disposing:
            return LostRace(run_id, None)
        return Acquired(run_id, epoch)

    def release(self, run_id: str, *, ended: bool = False) -> None:
        """Nothing to give up per run: the global lease covers them all."""

    def fence_epoch(self, run_id: str) -> int | None:
        return self.lease.epoch

    def check_wake(self, run_id: str, wake_kind: str) -> bool:
        return self.lease.held

    def release_in_commit(self, fence: Fence) -> None:
        """Nothing to release: no per-run claim was taken."""

    @contextmanager
    def fenced(self, fence: Fence) -> Iterator[None]:
        """Proven by the global lease; no one-statement forms (:attr:`one_statement`)."""
        with fenced_by_global_lease(fence, using=self.using):
            yield

    # -- selection ------------------------------------------------------------------

    def due_runs(self, now: datetime, names: Collection[str], *, limit: int) -> list[str]:
        # Registered types only: a due run this engine cannot drive would
        # otherwise be picked (and turned away) on every tick.
        return scans.started_due(now, list(names), limit=limit, using=self.using)

    def claim_pending(self, now: datetime, names: Collection[str], capacity: int) -> list[str]:
        if not self.lease.held:
            return []
        ready = ready_window(now, names, capacity, using=self.using)
        return [candidate.run_id for candidate in ready[:capacity]]

    def held_runs(self, names: Collection[str]) -> list[str]:
        if not self.lease.held:
            return []
        return list(scans.started(list(names), using=self.using).values_list("pk", flat=True))

    def held_count(self) -> int:
        return 0

    def held_with_buffered_signal(self, names: Collection[str]) -> list[str]:
        if not self.lease.held:
            return []
        return held_with_buffered_signal(
            None, names, held=lambda: self.held_runs(names), using=self.using
        )

    def held_with_pending_updates(self, names: Collection[str]) -> list[str]:
        if not self.lease.held:
            return []
        return held_with_pending_updates(
            None, names, held=lambda: self.held_runs(names), using=self.using
        )

    # -- recovery ---------------------------------------------------------------------

    def recover(
        self,
        names: Collection[str],
        drive: Callable[[str], bool],
        busy: Callable[[str], bool],
    ) -> PassResult:
        """Drive the runs a previous lease holder left mid-turn.

        A run that was ``running`` when its holder died has no wake hint and no
        due timer, so the fast tick never finds it; without this the standby
        that takes the lease over would strand it. Any ``running`` run of a
        registered type that this engine is not driving is one of those.
        """
        result = PassResult("reclaim", started_at=self.now())
        if self.lease.held and not self.disposing:
            orphans = (
                scans.started(list(names), using=self.using)
                .filter(status=RunStatus.RUNNING)
                .values_list("pk", flat=True)[:500]
            )
            for run_id in orphans:
                if busy(run_id):
                    continue
                result.record(run_id, Outcome.RECLAIMED if drive(run_id) else Outcome.NOT_ELIGIBLE)
        return result.done()

    # -- short-lived engines ----------------------------------------------------------

    def live_owners(self, run_ids: list[str]) -> dict[str, str]:
        """Holding the global lease is owning every run: all of ``run_ids`` when
        its holder is live, none otherwise. A short-lived engine never takes the
        lease (it could not renew it), so :meth:`take_stranded` is the default:
        it leaves a wake hint for the next lease holder."""
        holder = self.lease.live_holder()
        return {} if holder is None else dict.fromkeys(run_ids, holder)
