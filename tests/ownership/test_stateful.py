"""A Hypothesis state machine: several engines doing random claim transitions,
clock moves and fenced writes against a small reference model of the protocol (docs/ownership.md)

Every result is compared with what the model predicts, and after every step:
the database matches the model; epochs only grow; never two live engines
believing they hold the same workflow (except where a revocation told only the
database, which fencing covers); a deposed engine's fenced write is refused and
leaves no row behind.
"""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from weft_django.conf import get_settings
from weft_django.exceptions import EngineDeposedError, WeftWorkflowClaimLostWarning
from weft_django.models import Claim, Engine, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership.claims.cooldown import Cooldown
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.claims.results import (
    Acquired,
    BackoffSkipped,
    Lost,
    LostRace,
    NotExpired,
    NotHeld,
    Released,
)
from weft_django.ownership.claims.revoke import revoke_statement
from weft_django.ownership.leases.engines import register_engine
from weft_django.ownership.writes.fence import fenced
from weft_django.ownership.writes.requests import Fence

from ..conftest import FakeClock, FakeMonotonic

ENGINES = ("e0", "e1", "e2")
WORKFLOWS = ("w0", "w1")
BASE = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
SECOND = 1_000_000  # model time is in integer microseconds
TTL = 30 * SECOND
GRACE = 10 * SECOND  # 2 x CLAIM_RENEW_INTERVAL
COOLDOWN_BASE, COOLDOWN_CAP = 5.0, 120.0
STEPS = [1, 1000, SECOND, 5 * SECOND, 10 * SECOND, 30 * SECOND, 40 * SECOND]


class OwnershipMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # one example = one clean slate inside the test's transaction
        WorkflowEvent.objects.all().delete()
        WorkflowRun.objects.all().delete()
        Claim.objects.all().delete()
        Engine.objects.all().delete()
        self.clock = FakeClock(BASE)
        self.mono = FakeMonotonic()
        config = get_settings()
        self.registries: dict[str, ClaimRegistry] = {}
        for engine_id in ENGINES:
            register_engine(config, engine_id=engine_id, kind="test", now=self.clock())
            self.registries[engine_id] = ClaimRegistry(
                engine_id,
                timing=config.claim_timing,
                clock=self.clock,
                cooldown=Cooldown(base=COOLDOWN_BASE, cap=COOLDOWN_CAP, clock=self.mono),
            )
        for workflow_id in WORKFLOWS:
            WorkflowRun.objects.create(
                id=workflow_id, workflow_name="t.wf", status=RunStatus.RUNNING
            )
        # the reference model
        self.t = 0
        self.lease = dict.fromkeys(ENGINES, TTL)  # lease end, model microseconds
        self.revocations = dict.fromkeys(ENGINES, 0)
        self.seen = dict.fromkeys(ENGINES, 0)  # revocations as of each engine's last scan
        self.claims: dict[str, tuple[int, str | None] | None] = dict.fromkeys(WORKFLOWS)
        self.local: dict[str, dict[str, int]] = {e: {} for e in ENGINES}
        self.history: dict[tuple[str, str], set[int]] = {}  # epochs each engine ever held
        self.revoked: set[tuple[str, str, int]] = set()  # beliefs voided by a revocation
        self.losses: dict[tuple[str, str], int] = {}
        self.until: dict[tuple[str, str], float] = {}
        self.last_epoch = dict.fromkeys(WORKFLOWS, 0)
        self.seq = 0

    # -- model helpers -------------------------------------------------------------

    def lease_at(self, engine_id: str) -> datetime:
        return BASE + timedelta(microseconds=self.lease[engine_id])

    def expired(self, engine_id: str) -> bool:
        return self.lease[engine_id] + GRACE < self.t

    def epoch(self, workflow_id: str) -> int:
        state = self.claims[workflow_id]
        return 0 if state is None else state[0]

    def holder(self, workflow_id: str) -> str | None:
        state = self.claims[workflow_id]
        return None if state is None else state[1]

    def blocked(self, engine_id: str, workflow_id: str) -> float | None:
        until = self.until.get((engine_id, workflow_id))
        return until if until is not None and self.mono.value < until else None

    def win(self, engine_id: str, workflow_id: str, epoch: int) -> None:
        self.claims[workflow_id] = (epoch, engine_id)
        self.local[engine_id][workflow_id] = epoch
        self.history.setdefault((engine_id, workflow_id), set()).add(epoch)
        self.losses.pop((engine_id, workflow_id), None)
        self.until.pop((engine_id, workflow_id), None)

    def expect_acquire(self, engine_id: str, workflow_id: str):
        holder = self.holder(workflow_id)
        if holder is not None:
            if holder == engine_id and self.local[engine_id].get(workflow_id) == self.epoch(
                workflow_id
            ):
                return Acquired(workflow_id, self.epoch(workflow_id))
            return LostRace(workflow_id, holder)
        epoch = self.epoch(workflow_id) + 1
        self.win(engine_id, workflow_id, epoch)
        return Acquired(workflow_id, epoch)

    # -- rules -----------------------------------------------------------------

    @rule(step=st.sampled_from(STEPS))
    def advance(self, step: int) -> None:
        self.t += step
        self.clock.set(BASE + timedelta(microseconds=self.t))
        self.mono.value += step / SECOND

    @rule(engine_id=st.sampled_from(ENGINES), past=st.sampled_from([0, 1]))
    def advance_to_deadline(self, engine_id: str, past: int) -> None:
        """Land exactly on an engine's expiry deadline, or one microsecond past it."""
        target = self.lease[engine_id] + GRACE + past
        if target > self.t:
            self.advance(target - self.t)

    @rule(engine_id=st.sampled_from(ENGINES), workflow_id=st.sampled_from(WORKFLOWS))
    def acquire(self, engine_id: str, workflow_id: str) -> None:
        until = self.blocked(engine_id, workflow_id)
        expected = (
            BackoffSkipped(workflow_id, until)
            if until is not None
            else self.expect_acquire(engine_id, workflow_id)
        )
        assert self.registries[engine_id].acquire(workflow_id) == expected

    @rule(engine_id=st.sampled_from(ENGINES), workflow_id=st.sampled_from(WORKFLOWS))
    def claim(self, engine_id: str, workflow_id: str) -> None:
        until = self.blocked(engine_id, workflow_id)
        holder = self.holder(workflow_id)
        if until is not None:
            expected = BackoffSkipped(workflow_id, until)
        elif holder is None or (
            holder == engine_id
            and self.local[engine_id].get(workflow_id) == self.epoch(workflow_id)
        ):
            expected = self.expect_acquire(engine_id, workflow_id)
        elif not self.expired(holder):
            expected = NotExpired(workflow_id, holder, self.lease_at(holder))
        else:
            expected = self.take_over(engine_id, workflow_id, holder)
        assert self.registries[engine_id].claim(workflow_id) == expected

    @rule(
        engine_id=st.sampled_from(ENGINES),
        workflow_id=st.sampled_from(WORKFLOWS),
        past=st.sampled_from([0, 1]),
    )
    def contest_at_the_deadline(self, engine_id: str, workflow_id: str, past: int) -> None:
        """Move to the holder's expiry deadline exactly (or 1 us past it), then claim."""
        holder = self.holder(workflow_id)
        if holder is not None:
            self.advance_to_deadline(holder, past)
        self.claim(engine_id, workflow_id)

    def take_over(self, engine_id: str, workflow_id: str, holder: str) -> Acquired:
        assert self.expired(holder)  # never depose a live holder
        epoch = self.epoch(workflow_id) + 1
        self.revocations[holder] += 1
        self.win(engine_id, workflow_id, epoch)
        return Acquired(workflow_id, epoch, takeover=True)

    @rule(
        engine_id=st.sampled_from(ENGINES),
        workflow_id=st.sampled_from(WORKFLOWS),
        named=st.sampled_from(ENGINES),
        stale_by=st.sampled_from([0, 0, 1]),
    )
    def takeover_from_a_read(
        self, engine_id: str, workflow_id: str, named: str, stale_by: int
    ) -> None:
        """takeover() with a holder and epoch as read earlier (possibly stale now)."""
        holder = self.holder(workflow_id) or named
        epoch = self.epoch(workflow_id) - stale_by
        until = self.blocked(engine_id, workflow_id)
        if until is not None:
            expected = BackoffSkipped(workflow_id, until)
        elif not self.expired(holder):
            if self.claims[workflow_id] == (epoch, holder):
                expected = NotExpired(workflow_id, holder, self.lease_at(holder))
            else:
                expected = LostRace(workflow_id, self.holder(workflow_id))
        elif self.claims[workflow_id] == (epoch, holder):
            expected = self.take_over(engine_id, workflow_id, holder)
        else:
            expected = LostRace(workflow_id, self.holder(workflow_id))
        result = self.registries[engine_id].takeover(workflow_id, holder_id=holder, epoch=epoch)
        assert result == expected

    @rule(engine_id=st.sampled_from(ENGINES))
    def renew(self, engine_id: str) -> None:
        self.lease[engine_id] = self.t + TTL
        expected: list[Lost] = []
        if self.revocations[engine_id] != self.seen[engine_id]:
            for workflow_id, epoch in list(self.local[engine_id].items()):
                if self.claims[workflow_id] != (epoch, engine_id):
                    expected.append(Lost(workflow_id, epoch))
                    del self.local[engine_id][workflow_id]
                    key = (engine_id, workflow_id)
                    self.losses[key] = self.losses.get(key, 0) + 1
                    delay = min(COOLDOWN_BASE * 2 ** (self.losses[key] - 1), COOLDOWN_CAP)
                    self.until[key] = self.mono.value + delay
            self.seen[engine_id] = self.revocations[engine_id]
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            result = self.registries[engine_id].renew()
        assert result.engine_renewed
        assert sorted(result.lost, key=str) == sorted(expected, key=str)
        lost_warnings = [w for w in record if w.category is WeftWorkflowClaimLostWarning]
        assert sorted(w.message.workflow_id for w in lost_warnings) == sorted(
            item.workflow_id for item in expected
        )

    @rule(engine_id=st.sampled_from(ENGINES), workflow_id=st.sampled_from(WORKFLOWS))
    def release(self, engine_id: str, workflow_id: str) -> None:
        epoch = self.local[engine_id].pop(workflow_id, None)
        if epoch is None:
            expected = NotHeld(workflow_id)
        elif self.claims[workflow_id] == (epoch, engine_id):
            self.claims[workflow_id] = (epoch, None)
            expected = Released(workflow_id, epoch)
        else:
            expected = NotHeld(workflow_id)
        assert self.registries[engine_id].release(workflow_id) == expected

    @rule(engine_id=st.sampled_from(ENGINES))
    def release_all(self, engine_id: str) -> None:
        count = 0
        for workflow_id in WORKFLOWS:
            if self.holder(workflow_id) == engine_id:
                self.claims[workflow_id] = (self.epoch(workflow_id), None)
                count += 1
        self.local[engine_id].clear()
        assert self.registries[engine_id].release_all() == count

    @rule(workflow_id=st.sampled_from(WORKFLOWS))
    def revoke(self, workflow_id: str) -> None:
        """cancel/suspend/purge by any process: epoch rotated, holder dropped."""
        holder = self.holder(workflow_id)
        if holder is not None:
            self.revocations[holder] += 1
            self.revoked.add((holder, workflow_id, self.epoch(workflow_id)))
        epoch = self.epoch(workflow_id) + 1
        self.claims[workflow_id] = (epoch, None)
        assert revoke_statement("default", workflow_id) == epoch

    @rule(
        engine_id=st.sampled_from(ENGINES),
        workflow_id=st.sampled_from(WORKFLOWS),
        back=st.integers(min_value=0, max_value=2),
    )
    def fenced_write(self, engine_id: str, workflow_id: str, back: int) -> None:
        """A write at the epoch this engine believes it holds, or an older one it held."""
        known = sorted(self.history.get((engine_id, workflow_id), set()))
        current = self.local[engine_id].get(workflow_id)
        if back == 0 and current is not None:
            epoch = current
        elif known:
            epoch = known[max(0, len(known) - 1 - back)]
        else:
            epoch = 1  # never held: a guess
        allowed = self.claims[workflow_id] == (epoch, engine_id)
        self.seq += 1
        try:
            with fenced(Fence(workflow_id, engine_id, epoch)):
                WorkflowEvent.objects.create(
                    run_id=workflow_id, seq=self.seq, kind="step", engine_id=engine_id, epoch=epoch
                )
        except EngineDeposedError as exc:
            assert not allowed, "the holder at its epoch was refused"
            assert exc.workflow_id == workflow_id
        else:
            assert allowed, f"{engine_id}@{epoch} wrote to {workflow_id} held as {self.claims}"
        assert WorkflowEvent.objects.filter(seq=self.seq).exists() == allowed

    @rule(engine_id=st.sampled_from(ENGINES), workflow_id=st.sampled_from(WORKFLOWS))
    def check_wake(self, engine_id: str, workflow_id: str) -> None:
        epoch = self.local[engine_id].get(workflow_id)
        ok = epoch is not None and self.claims[workflow_id] == (epoch, engine_id)
        if epoch is not None and not ok:
            del self.local[engine_id][workflow_id]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert self.registries[engine_id].check_wake(workflow_id, "timer") is ok

    # -- invariants ------------------------------------------------------------

    @invariant()
    def database_matches_the_model(self) -> None:
        rows = {
            workflow_id: (epoch, holder)
            for workflow_id, epoch, holder in Claim.objects.values_list(
                "workflow_id", "epoch", "holder_id"
            )
        }
        assert rows == {w: state for w, state in self.claims.items() if state is not None}
        revocations = dict(Engine.objects.values_list("id", "revocations"))
        assert revocations == self.revocations
        for engine_id, registry in self.registries.items():
            assert registry.held == self.local[engine_id]

    @invariant()
    def epochs_only_grow(self) -> None:
        stored = dict(Claim.objects.values_list("workflow_id", "epoch"))
        for workflow_id in WORKFLOWS:
            epoch = stored.get(workflow_id, 0)
            assert epoch >= self.last_epoch[workflow_id]
            self.last_epoch[workflow_id] = epoch

    @invariant()
    def never_two_live_holders(self) -> None:
        """Among engines whose lease is live, at most one believes it holds a workflow
        (a belief voided by a revocation excepted: fencing refuses its writes), and
        that belief is the database's holder at the current epoch."""
        for workflow_id in WORKFLOWS:
            believers = [
                engine_id
                for engine_id in ENGINES
                if workflow_id in self.local[engine_id]
                and not self.expired(engine_id)
                and (engine_id, workflow_id, self.local[engine_id][workflow_id]) not in self.revoked
            ]
            assert len(believers) <= 1, (workflow_id, believers)
            for engine_id in believers:
                assert self.claims[workflow_id] == (self.local[engine_id][workflow_id], engine_id)


def test_ownership_state_machine(db, weft_settings):
    run_state_machine_as_test(
        OwnershipMachine,
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
