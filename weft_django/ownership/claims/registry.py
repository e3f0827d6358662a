"""The claim registry: per-workflow fenced claims (docs/ownership.md).

Every transition is one conditional UPDATE (or one INSERT) whose rowcount
decides the outcome; nothing is read, modified and written back in Python.
Liveness comes from the holder engine's lease (``Engine.lease_expires_at``),
so renewing every claim an engine holds is one statement on its engine row.
A takeover bumps the old holder's ``revocations`` counter with the lease
re-check in the same UPDATE, inside the transaction that moves the claim, so
an owner that renewed after our read is never deposed, and the owner's next
renewal sees the counter move and finds exactly which claims it lost.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from django.db import OperationalError, transaction
from django.db.models import F

from ...conf import Timing, get_settings
from ...exceptions import WeftWorkflowClaimLostWarning, WeftWorkflowWakeDiscardedWarning, warn
from ...models import Claim, Engine, EngineStatus, db_for
from .. import metrics
from ..clock import Clock, DbNow, db_now, seconds
from ..locks import PASS_LOCK_WAIT, bounded_lock_wait, is_lock_failure
from .cooldown import Cooldown
from .first import insert_first_claims
from .release import release_engine, release_held
from .results import (
    Acquired,
    BackoffSkipped,
    Busy,
    ClaimResult,
    ClaimState,
    Lost,
    LostRace,
    NotExpired,
    NotHeld,
    Released,
    RenewResult,
)

logger = logging.getLogger("weft_django.ownership")


class _Rollback(Exception):
    """Internal: undo a multi-statement transition that lost its race."""


class ClaimRegistry:
    """The claims one engine holds, and the transitions that change them.

    ``timing`` defaults to the claim timing of the current settings. ``clock``
    (default: the database's clock) is injectable so tests can walk the expiry
    boundary exactly; it must still be *one* clock shared by every engine
    under test.
    """

    def __init__(
        self,
        engine_id: str,
        *,
        timing: Timing | None = None,
        using: str | None = None,
        clock: Clock | None = None,
        cooldown: Cooldown | None = None,
    ) -> None:
        self.engine_id = engine_id
        self.timing = timing or get_settings().claim_timing
        self.using = db_for(using)
        self._clock = clock
        # "is None", not "or": an empty Cooldown has len() 0 and is falsy, so
        # "cooldown or Cooldown(...)" silently threw an injected one away.
        self.cooldown = (
            cooldown
            if cooldown is not None
            else Cooldown(base=self.timing.renew_interval, cap=self.timing.cooldown_cap)
        )
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        # A new engine row starts at 0 revocations (see engines.register_engine).
        self._revocations_seen: int | None = 0
        self.disposing = False
        #: Claims taken over from expired holders since this registry was made.
        self.taken_over = 0

    # -- clock and judgments -------------------------------------------------

    def now(self) -> datetime:
        return self._clock() if self._clock is not None else db_now(self.using)

    # -- local view -----------------------------------------------------------

    @property
    def held(self) -> dict[str, int]:
        """A snapshot of the claims this engine holds: workflow id -> epoch."""
        with self._lock:
            return dict(self._held)

    def epoch_of(self, workflow_id: str) -> int | None:
        with self._lock:
            return self._held.get(workflow_id)

    # The claims_active gauge counts the claims of every engine in this process
    # (a worker and a Celery task may share one), so each registry moves it by
    # its own changes instead of setting it to its own count.

    def _remember(self, workflow_id: str, epoch: int) -> None:
        with self._lock:
            new = workflow_id not in self._held
            self._held[workflow_id] = epoch
        if new:
            metrics.claims_active.inc()

    def adopt(self, won: dict[str, int], *, takeover: bool) -> None:
        """Record claims a batched transition won (workflow id -> new epoch):
        local state, cooldown windows ended, metrics, under one lock."""
        with self._lock:
            new = sum(1 for workflow_id in won if workflow_id not in self._held)
            self._held.update(won)
            if takeover:
                self.taken_over += len(won)
        metrics.claims_active.inc(new)
        for workflow_id in won:
            self.cooldown.clear(workflow_id)
        metrics.claim_attempts.labels(outcome="takeover" if takeover else "acquired").inc(len(won))

    def forget(self, workflow_id: str, epoch: int | None = None) -> bool:
        """Drop local state for a claim (only at ``epoch`` when given)."""
        with self._lock:
            if workflow_id not in self._held:
                return False
            if epoch is not None and self._held[workflow_id] != epoch:
                return False
            del self._held[workflow_id]
        metrics.claims_active.dec()
        return True

    def mark_lost(self, workflow_id: str, epoch: int) -> Lost | None:
        """Record that a claim was lost: local state dropped, warning, metric, cooldown."""
        if not self.forget(workflow_id, epoch):
            return None
        metrics.claim_attempts.labels(outcome="deposed").inc()
        metrics.renewal_failures.inc()
        self.cooldown.record_loss(workflow_id)
        warn(WeftWorkflowClaimLostWarning(workflow_id))
        return Lost(workflow_id, epoch)

    # -- reads ----------------------------------------------------------------

    def read(self, workflow_id: str) -> ClaimState | None:
        row = (
            Claim.objects.using(self.using)
            .filter(workflow_id=workflow_id)
            .values_list("epoch", "holder_id", "claimed_at", "holder__lease_expires_at")
            .first()
        )
        if row is None:
            return None
        epoch, holder_id, claimed_at, expires_at = row
        return ClaimState(workflow_id, epoch, holder_id, claimed_at, expires_at)

    # -- transitions ----------------------------------------------------------

    def _skip_for_cooldown(self, workflow_id: str) -> BackoffSkipped | None:
        until = self.cooldown.blocked_until(workflow_id)
        if until is None:
            return None
        metrics.claim_attempts.labels(outcome="backoff_skipped").inc()
        return BackoffSkipped(workflow_id, until)

    def _won(self, workflow_id: str, epoch: int, *, takeover: bool) -> Acquired:
        self._remember(workflow_id, epoch)
        if takeover:
            with self._lock:
                self.taken_over += 1
        self.cooldown.clear(workflow_id)
        metrics.claim_attempts.labels(outcome="takeover" if takeover else "acquired").inc()
        return Acquired(workflow_id, epoch, takeover=takeover)

    def _lost_race(self, workflow_id: str) -> LostRace:
        metrics.claim_attempts.labels(outcome="lost_race").inc()
        state = self.read(workflow_id)
        return LostRace(workflow_id, state.holder_id if state else None)

    def acquire(self, workflow_id: str, *, expected_epoch: int | None = None) -> ClaimResult:
        """Take an unheld claim: epoch becomes old+1 (1 for a new workflow id).

        ``expected_epoch`` is the epoch the caller read; when omitted it is read
        here. A claim that is held (live or not) is never taken by ``acquire``:
        that is ``takeover``'s job, after the expiry judgment.
        """
        skipped = self._skip_for_cooldown(workflow_id)
        if skipped is not None:
            return skipped
        if self.disposing:
            return LostRace(workflow_id, None)
        if expected_epoch is None:
            state = self.read(workflow_id)
            if state is not None and state.holder_id is not None:
                if state.holder_id == self.engine_id and self.epoch_of(workflow_id) == state.epoch:
                    return Acquired(workflow_id, state.epoch)
                metrics.claim_attempts.labels(outcome="lost_race").inc()
                return LostRace(workflow_id, state.holder_id)
            expected_epoch = state.epoch if state is not None else 0
        if expected_epoch == 0 and self._insert_first_claim(workflow_id):
            return self._won(workflow_id, 1, takeover=False)
        # (Not inserted: someone inserted first, or a row exists; try the UPDATE.)
        updated = (
            Claim.objects.using(self.using)
            .filter(workflow_id=workflow_id, holder__isnull=True, epoch=expected_epoch)
            .update(holder_id=self.engine_id, epoch=F("epoch") + 1, claimed_at=self.stamp())
        )
        if updated == 1:
            return self._won(workflow_id, expected_epoch + 1, takeover=False)
        return self._lost_race(workflow_id)

    def stamp(self) -> datetime | DbNow:
        """``claimed_at``: bookkeeping, never judged, so the database's own ``now``
        in the statement itself (no clock read) unless a test injected a clock."""
        return self._clock() if self._clock is not None else DbNow()

    def _insert_first_claim(self, workflow_id: str) -> bool:
        """Epoch 1 for a workflow id that never had a claim: one INSERT that does
        nothing on a duplicate key (False when another engine inserted first)."""
        return bool(
            insert_first_claims(self.using, self.engine_id, [workflow_id], stamp=self.stamp_value())
        )

    # -- batch intake (weft_django.ownership.claims.intake) ------------------------------

    def may_take(self, workflow_id: str) -> bool:
        """What ``acquire`` checks before any statement: not disposing, and the
        workflow not in its anti-thrash cooldown (a skip is counted)."""
        return not self.disposing and self._skip_for_cooldown(workflow_id) is None

    def stamp_value(self) -> datetime | None:
        """The injected clock's now for a ``claimed_at`` (None: the database's own
        now, written inside the statement)."""
        return self._clock() if self._clock is not None else None

    def record_acquired(self, workflow_id: str, epoch: int) -> Acquired:
        """Book a claim a caller won by its own conditional statement (the intake's
        batch INSERT of epoch-1 claims): local view, cooldown, metrics."""
        return self._won(workflow_id, epoch, takeover=False)

    def takeover(self, workflow_id: str, *, holder_id: str, epoch: int) -> ClaimResult:
        """Take a claim from ``holder_id`` at ``epoch`` once its lease has expired.

        One transaction: bump the old holder's revocation counter *only if its
        lease is still expired* (the re-check and the row lock in one UPDATE),
        then move the claim conditional on the exact holder and epoch read. Its
        lock waits are bounded: a holder frozen inside a transaction keeps its
        claim row locked until the server ends its session, and meanwhile this
        returns :class:`Busy` instead of stalling the caller's pass.
        """
        skipped = self._skip_for_cooldown(workflow_id)
        if skipped is not None:
            return skipped
        if self.disposing:
            return LostRace(workflow_id, holder_id)
        now = self.now()
        cutoff = self.timing.cutoff(now)
        try:
            with (
                transaction.atomic(using=self.using),
                bounded_lock_wait(self.using, PASS_LOCK_WAIT),
            ):
                bumped = (
                    Engine.objects.using(self.using)
                    .filter(id=holder_id, lease_expires_at__lt=cutoff)
                    .update(revocations=F("revocations") + 1)
                )
                if bumped != 1:
                    raise _Rollback("live")
                moved = (
                    Claim.objects.using(self.using)
                    .filter(workflow_id=workflow_id, holder_id=holder_id, epoch=epoch)
                    .update(holder_id=self.engine_id, epoch=F("epoch") + 1, claimed_at=now)
                )
                if moved != 1:
                    raise _Rollback("race")
        except _Rollback as why:
            if str(why) == "live":
                state = self.read(workflow_id)
                if (
                    state is not None
                    and state.holder_id == holder_id
                    and state.epoch == epoch
                    and state.expires_at is not None
                ):
                    return NotExpired(workflow_id, holder_id, state.expires_at)
            return self._lost_race(workflow_id)
        except OperationalError as exc:
            if not is_lock_failure(exc):
                raise
            metrics.claim_attempts.labels(outcome="busy").inc()
            return Busy(workflow_id, holder_id)
        logger.info(
            "took over run %s from engine %s at epoch %d", workflow_id, holder_id, epoch + 1
        )
        return self._won(workflow_id, epoch + 1, takeover=True)

    def claim(self, workflow_id: str) -> ClaimResult:
        """Read, judge and then ``acquire`` or ``takeover``: what scans call."""
        skipped = self._skip_for_cooldown(workflow_id)
        if skipped is not None:
            return skipped
        state = self.read(workflow_id)
        if state is None or state.holder_id is None:
            return self.acquire(workflow_id, expected_epoch=state.epoch if state else 0)
        if state.holder_id == self.engine_id:
            if self.epoch_of(workflow_id) == state.epoch:
                return Acquired(workflow_id, state.epoch)
            return self._readopt(workflow_id, state.epoch)
        if state.expires_at is None or not self.timing.is_expired(state.expires_at, self.now()):
            return NotExpired(workflow_id, state.holder_id, state.expires_at or self.now())
        return self.takeover(workflow_id, holder_id=state.holder_id, epoch=state.epoch)

    def _readopt(self, workflow_id: str, epoch: int) -> ClaimResult:
        """The database says we hold it but we dropped it locally: take it again
        under a new epoch, so any stale turn of ours at the old epoch is fenced."""
        moved = (
            Claim.objects.using(self.using)
            .filter(workflow_id=workflow_id, holder_id=self.engine_id, epoch=epoch)
            .update(epoch=F("epoch") + 1, claimed_at=self.now())
        )
        if moved == 1:
            return self._won(workflow_id, epoch + 1, takeover=False)
        return self._lost_race(workflow_id)

    def renew(self) -> RenewResult:
        """Keep every claim this engine holds alive: O(1) statements.

        Extends the engine's lease (one UPDATE), reads its revocation counter
        (one SELECT) and, only when that counter moved, lists the claims it
        still holds to report the ones that were taken over or revoked.
        """
        started = time.monotonic()
        now = self.now()
        result = RenewResult(started_at=now, held=self.held)
        renewed = (
            Engine.objects.using(self.using)
            .filter(id=self.engine_id)
            .exclude(status=EngineStatus.STOPPED)
            .update(
                lease_expires_at=now + seconds(self.timing.ttl),
                heartbeat_at=now,
            )
        )
        result.engine_renewed = renewed == 1
        revocations = (
            Engine.objects.using(self.using)
            .filter(id=self.engine_id)
            .values_list("revocations", flat=True)
            .first()
        )
        if revocations is None or revocations != self._revocations_seen:
            still_held = dict(
                Claim.objects.using(self.using)
                .filter(holder_id=self.engine_id)
                .values_list("workflow_id", "epoch")
            )
            for workflow_id, epoch in result.held.items():
                if still_held.get(workflow_id) != epoch:
                    lost = self.mark_lost(workflow_id, epoch)
                    if lost is not None:
                        result.lost.append(lost)
            self._revocations_seen = revocations
        if result.engine_renewed:
            self.cooldown.forgive(result.held, exclude={item.workflow_id for item in result.lost})
        if not result.engine_renewed:
            metrics.renewal_failures.inc()
            logger.error("engine %s: its engine row is gone or stopped", self.engine_id)
        result.finished_at = now + seconds(time.monotonic() - started)
        return result

    def release(
        self, workflow_id: str, *, epoch: int | None = None, ended: bool = False
    ) -> Released | NotHeld:
        """Give a claim up, epoch unchanged (terminal/suspend commits do it in-line).

        ``ended``: the run is finished, suspended or gone, so nothing should
        take it (the release rule, :mod:`.release`, leaves it unstamped)."""
        epoch = self.epoch_of(workflow_id) if epoch is None else epoch
        if epoch is None:
            return NotHeld(workflow_id)
        self.forget(workflow_id, epoch)
        released = release_held(self.using, workflow_id, self.engine_id, epoch, ended=ended)
        return Released(workflow_id, epoch) if released else NotHeld(workflow_id)

    def release_all(self) -> int:
        """Release every claim this engine holds (graceful shutdown; best effort)."""
        with self._lock:
            count = len(self._held)
            self._held.clear()
        metrics.claims_active.dec(count)
        return release_engine(self.using, self.engine_id)

    def check_wake(self, workflow_id: str, wake_kind: str) -> bool:
        """Before driving a run for a wake: does the database agree we hold it?

        Compares engine id *and* epoch; a mismatch drops local state and emits
        ``WeftWorkflowWakeDiscardedWarning``.
        """
        epoch = self.epoch_of(workflow_id)
        state = self.read(workflow_id)
        if (
            epoch is not None
            and state is not None
            and state.holder_id == self.engine_id
            and state.epoch == epoch
        ):
            return True
        if epoch is None:
            return False  # not ours (any more): nothing to discard
        self.forget(workflow_id, epoch)
        warn(WeftWorkflowWakeDiscardedWarning(workflow_id, wake_kind))
        return False


def release_statement(
    using: str, workflow_id: str, engine_id: str, epoch: int, *, ended: bool = False
) -> bool:
    """The release UPDATE itself, for use inside a caller's transaction: the
    release rule's :func:`~weft_django.ownership.claims.release.release_held` (unless
    the run has ``ended``, the claim is stamped ``released_at``)."""
    return release_held(using, workflow_id, engine_id, epoch, ended=ended)
