"""Mode ``workflow-lease`` (the default): per-workflow fenced claims.

Every run has its own claim with a fencing epoch; any number of engines share
the store, each owning the runs it claimed. Liveness comes from the holder
engine's lease, renewed in one statement; a crashed engine's runs are taken
over by the reclaim scan after the expiry judgment (docs/ownership.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cached_property

from django.db import connections

from ...conf import WORKFLOW_LEASE, Timing, WeftSettings
from ..claims.intake import claim_ready
from ..claims.release import release_held
from ..claims.results import ClaimResult, LostRace
from ..passes import scans
from ..passes.outcomes import PassResult
from ..passes.reclaim import reclaim_scan, take_due
from ..passes.signal_poll import held_with_buffered_signal
from ..passes.update_poll import held_with_pending_updates
from ..writes.fence import fenced
from ..writes.group import GroupCommit
from ..writes.requests import (
    Checkpoint,
    Fence,
    Finish,
    Form,
    NoOneStatementForm,
    Park,
    SignalTake,
    TakeSignal,
    forms_on,
)
from ..writes.single import FencedWrite, fenced_finish, fenced_insert
from ..writes.wake import fenced_take_signal
from .base import Ownership


class WorkflowLeaseOwnership(Ownership):
    name = WORKFLOW_LEASE
    short_lived_drives = True

    @classmethod
    def timing_of(cls, settings: WeftSettings) -> Timing:
        return settings.claim_timing

    # -- lifecycle ----------------------------------------------------------------

    def renew(self) -> PassResult:
        renewal = self.claims.renew()
        result = PassResult("renew", started_at=renewal.started_at)
        result.succeeded = renewal.engine_renewed
        result.outcomes = renewal.outcomes  # a fresh dict: no per-run loop here
        result.finished_at = renewal.finished_at
        return result

    def release_all(self) -> int:
        return self.claims.release_all()

    # -- one run ------------------------------------------------------------------

    def acquire(self, run_id: str) -> ClaimResult:
        if self.disposing:
            return LostRace(run_id, None)
        return self.claims.claim(run_id)

    def release(self, run_id: str, *, ended: bool = False) -> None:
        self.claims.release(run_id, ended=ended)

    def fence_epoch(self, run_id: str) -> int | None:
        return self.claims.epoch_of(run_id)

    def check_wake(self, run_id: str, wake_kind: str) -> bool:
        return self.claims.check_wake(run_id, wake_kind)

    # -- fenced writes --------------------------------------------------------------

    @contextmanager
    def fenced(self, fence: Fence) -> Iterator[None]:
        with fenced(fence, using=self.using):
            yield

    @cached_property
    def one_statement(self) -> frozenset[Form]:
        """Every form its database has (:func:`~..writes.requests.forms_on`)."""
        return forms_on(connections[self.using].vendor)

    @cached_property
    def group(self) -> GroupCommit | None:
        """The group commit of this engine's checkpoints and parks (PostgreSQL)."""
        if connections[self.using].vendor != "postgresql":
            return None
        return GroupCommit(self.using, self.engine_id)

    def insert_fenced(self, fence: Fence, checkpoint: Checkpoint) -> bool:
        if self.group is not None:
            return self.group.write(FencedWrite.of_checkpoint(fence, checkpoint))
        return fenced_insert(self.using, fence, checkpoint)

    def finish_fenced(self, fence: Fence, finish: Finish) -> bool:
        return fenced_finish(self.using, fence, finish)

    def park_fenced(self, fence: Fence, park: Park) -> bool:
        if self.group is None:
            raise NoOneStatementForm(park.form, connections[self.using].vendor)
        return self.group.write(FencedWrite.of_park(fence, park))

    def take_signal_fenced(self, fence: Fence, take: TakeSignal) -> SignalTake:
        return fenced_take_signal(self.using, fence, take)

    def release_in_commit(self, fence: Fence) -> None:
        release_held(self.using, fence.workflow_id, fence.engine_id, fence.epoch, ended=True)

    # -- selection ------------------------------------------------------------------

    def due_runs(self, now: datetime, names: Collection[str], *, limit: int) -> list[str]:
        """The held runs that are due, then the released runs of ``names`` that are
        due, taken here in one batch (the release rule: a ``resume``, a graceful
        stop, a Celery pass let them go; :func:`~..reclaim.take_due`)."""
        found = scans.woken(self.engine_id, now, names, limit=limit, using=self.using)
        return found.held + take_due(self.claims, found.free, names, now)

    def claim_pending(self, now: datetime, names: Collection[str], capacity: int) -> list[str]:
        """Off the ready-queue index, claimed in batches: see
        :mod:`weft_django.ownership.claims.intake`."""
        return claim_ready(self.claims, now, names, capacity)

    def held_runs(self, names: Collection[str]) -> list[str]:
        return sorted(self.claims.held)

    def held_count(self) -> int:
        return len(self.claims.held)

    def held_with_buffered_signal(self, names: Collection[str]) -> list[str]:
        return held_with_buffered_signal(
            self.engine_id, names, held=lambda: self.held_runs(names), using=self.using
        )

    def held_with_pending_updates(self, names: Collection[str]) -> list[str]:
        return held_with_pending_updates(
            self.engine_id, names, held=lambda: self.held_runs(names), using=self.using
        )

    # -- recovery ---------------------------------------------------------------------

    def recover(
        self,
        names: Collection[str],
        drive: Callable[[str], bool],
        busy: Callable[[str], bool],
    ) -> PassResult:
        """The reclaim scan: expired holders and ownerless active runs."""
        return reclaim_scan(self.claims, names=names, drive=drive)

    # -- short-lived engines ----------------------------------------------------------

    def live_owners(self, run_ids: list[str]) -> dict[str, str]:
        return scans.live_holders(run_ids, self.timing.cutoff(self.now()), using=self.using)
