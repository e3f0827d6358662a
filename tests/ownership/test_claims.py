"""Every claim transition and every result type of ClaimRegistry (docs/ownership.md).

Settings in force (the ``weft_settings`` fixture): CLAIM_TTL=30, CLAIM_RENEW_INTERVAL=5,
so a lease taken at ``t`` ends at ``t + 30`` and counts as expired strictly after
``t + 30 + 2 x 5``. Every engine shares the one FakeClock standing in for the
database clock.
"""

from __future__ import annotations

import warnings
from datetime import timedelta

import pytest

from weft_django.exceptions import WeftWorkflowClaimLostWarning, WeftWorkflowWakeDiscardedWarning
from weft_django.models import Claim, Engine, EngineStatus, RunStatus, WorkflowRun
from weft_django.ownership.claims.registry import ClaimRegistry, release_statement
from weft_django.ownership.claims.results import (
    Acquired,
    BackoffSkipped,
    ClaimState,
    Lost,
    LostRace,
    NotExpired,
    NotHeld,
    Released,
)
from weft_django.ownership.claims.revoke import revoke_statement

TTL = 30.0
GRACE = 10.0  # 2 x CLAIM_RENEW_INTERVAL
PAST_DEADLINE = TTL + GRACE + 0.001

CLAIM_ATTEMPTS = "weft_workflow_claim_attempts_total"


def row(workflow_id: str) -> tuple[int, str | None]:
    claim = Claim.objects.get(workflow_id=workflow_id)
    return claim.epoch, claim.holder_id


def revocations(engine_id: str) -> int:
    return Engine.objects.get(id=engine_id).revocations


@pytest.fixture
def a(make_registry) -> ClaimRegistry:
    return make_registry("engine-a")


@pytest.fixture
def b(make_registry) -> ClaimRegistry:
    return make_registry("engine-b")


@pytest.fixture
def c(make_registry) -> ClaimRegistry:
    return make_registry("engine-c")


# -- acquire -----------------------------------------------------------------


def test_acquire_of_a_new_workflow_id_gets_epoch_1(a, clock):
    assert a.acquire("wf") == Acquired("wf", 1)
    claim = Claim.objects.get(workflow_id="wf")
    assert (claim.epoch, claim.holder_id, claim.claimed_at) == (1, "engine-a", clock())
    assert a.held == {"wf": 1}
    assert a.epoch_of("wf") == 1


def test_release_then_acquire_increments_the_epoch_and_never_resets_it(a, b):
    assert a.acquire("wf") == Acquired("wf", 1)
    assert a.release("wf") == Released("wf", 1)
    assert row("wf") == (1, None)
    assert a.acquire("wf") == Acquired("wf", 2)
    assert a.release("wf") == Released("wf", 2)
    assert b.acquire("wf") == Acquired("wf", 3)
    assert row("wf") == (3, "engine-b")


def test_acquire_by_the_holder_again_returns_its_claim_unchanged(a):
    assert a.acquire("wf") == Acquired("wf", 1)
    assert a.acquire("wf") == Acquired("wf", 1)
    assert row("wf") == (1, "engine-a")


def test_acquire_of_a_held_claim_is_lost_race_naming_the_holder(a, b, clock, metric):
    a.acquire("wf")
    before = metric(CLAIM_ATTEMPTS, outcome="lost_race")
    assert b.acquire("wf") == LostRace("wf", "engine-a")
    assert metric(CLAIM_ATTEMPTS, outcome="lost_race") == before + 1
    # acquire never takes a held claim, not even from an expired holder: that is takeover's job
    clock.advance(PAST_DEADLINE)
    assert b.acquire("wf") == LostRace("wf", "engine-a")
    assert b.acquire("wf", expected_epoch=1) == LostRace("wf", "engine-a")
    assert row("wf") == (1, "engine-a")
    assert b.held == {}


def test_acquire_with_a_stale_expected_epoch_is_lost_race(a, b):
    a.acquire("wf")
    a.release("wf")  # unheld at epoch 1
    assert b.acquire("wf", expected_epoch=0) == LostRace("wf", None)
    assert row("wf") == (1, None)
    assert b.acquire("wf", expected_epoch=1) == Acquired("wf", 2)


def test_acquire_that_loses_the_insert_race_of_a_new_id_is_lost_race(a, b):
    # b read "no row" (expected epoch 0), then a inserted the claim first
    assert a.acquire("wf") == Acquired("wf", 1)
    assert b.acquire("wf", expected_epoch=0) == LostRace("wf", "engine-a")
    assert row("wf") == (1, "engine-a")
    assert b.held == {}


def test_acquire_while_disposing_takes_nothing(a):
    a.disposing = True
    assert isinstance(a.acquire("wf"), LostRace)
    assert not Claim.objects.filter(workflow_id="wf").exists()


# -- takeover ----------------------------------------------------------------


def test_takeover_of_a_live_holder_is_not_expired_and_changes_nothing(a, b, clock):
    a.acquire("wf")
    lease = Engine.objects.get(id="engine-a").lease_expires_at
    assert b.takeover("wf", holder_id="engine-a", epoch=1) == NotExpired("wf", "engine-a", lease)
    assert row("wf") == (1, "engine-a")
    assert revocations("engine-a") == 0
    assert b.held == {}


def test_takeover_after_expiry_bumps_the_epoch_and_the_old_holders_revocations(a, b, clock, metric):
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    before = metric(CLAIM_ATTEMPTS, outcome="takeover")
    assert b.takeover("wf", holder_id="engine-a", epoch=1) == Acquired("wf", 2, takeover=True)
    assert metric(CLAIM_ATTEMPTS, outcome="takeover") == before + 1
    assert row("wf") == (2, "engine-b")
    assert Claim.objects.get(workflow_id="wf").claimed_at == clock()
    assert revocations("engine-a") == 1
    assert b.held == {"wf": 2}
    # a still believes it holds epoch 1 until its next renewal says otherwise
    assert a.held == {"wf": 1}


def test_takeover_is_lost_race_when_holder_or_epoch_changed_since_the_read(a, b, c, clock):
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    read_by_b = b.read("wf")
    assert (read_by_b.holder_id, read_by_b.epoch) == ("engine-a", 1)
    # c wins between b's read and b's write
    assert c.claim("wf") == Acquired("wf", 2, takeover=True)
    assert b.takeover("wf", holder_id="engine-a", epoch=1) == LostRace("wf", "engine-c")
    assert row("wf") == (2, "engine-c")
    # b's bump of a's revocation counter was rolled back with its transaction
    assert revocations("engine-a") == 1
    assert b.held == {}


def test_takeover_of_a_claim_released_since_the_read_is_lost_race(a, b, clock):
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    release_statement("default", "wf", "engine-a", 1)
    assert b.takeover("wf", holder_id="engine-a", epoch=1) == LostRace("wf", None)
    assert row("wf") == (1, None)
    assert revocations("engine-a") == 0


def test_takeover_with_a_wrong_epoch_is_lost_race(a, b, clock):
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    assert b.takeover("wf", holder_id="engine-a", epoch=7) == LostRace("wf", "engine-a")
    assert row("wf") == (1, "engine-a")
    assert revocations("engine-a") == 0


def test_a_holder_that_renewed_after_the_read_is_never_deposed(a, b, clock):
    """The takeover's UPDATE re-checks the lease: judging from a stale read is not enough."""
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    state = b.read("wf")
    assert b.timing.is_expired(state.expires_at, clock())  # b's judgment: expired
    a.renew()  # ... but a renews before b writes
    result = b.takeover("wf", holder_id=state.holder_id, epoch=state.epoch)
    assert isinstance(result, NotExpired)
    assert row("wf") == (1, "engine-a")
    assert revocations("engine-a") == 0
    assert a.renew().lost == []


# -- claim(): read, judge, then acquire or takeover ----------------------------


def test_claim_acquires_judges_and_takes_over(a, b, clock):
    assert b.claim("new") == Acquired("new", 1)
    assert a.claim("wf") == Acquired("wf", 1)
    assert a.claim("wf") == Acquired("wf", 1)  # already ours
    result = b.claim("wf")
    assert isinstance(result, NotExpired)
    assert result.held_by == "engine-a"
    assert result.expires_at == Engine.objects.get(id="engine-a").lease_expires_at
    a.release("wf")
    assert b.claim("wf") == Acquired("wf", 2)  # unheld: plain acquire
    clock.advance(PAST_DEADLINE)
    assert a.claim("wf") == Acquired("wf", 3, takeover=True)
    assert row("wf") == (3, "engine-a")


# -- expiry boundary -----------------------------------------------------------


@pytest.mark.parametrize("past", [timedelta(microseconds=1), timedelta(milliseconds=1)])
def test_expiry_boundary_is_strict(a, b, clock, past):
    a.acquire("wf")
    deadline = Engine.objects.get(id="engine-a").lease_expires_at + timedelta(seconds=GRACE)
    clock.set(deadline)  # expires_at + 2 x renew == now: still live
    assert not b.timing.is_expired(deadline - timedelta(seconds=GRACE), clock())
    assert isinstance(b.claim("wf"), NotExpired)
    # the SQL re-check in the takeover statement draws the same line
    assert isinstance(b.takeover("wf", holder_id="engine-a", epoch=1), NotExpired)
    assert row("wf") == (1, "engine-a")
    clock.set(deadline + past)
    assert b.timing.is_expired(deadline - timedelta(seconds=GRACE), clock())
    assert b.claim("wf") == Acquired("wf", 2, takeover=True)


def test_expiry_boundary_of_the_sql_recheck_alone(a, b, clock):
    """takeover() itself (no Python judgment first) at and just past the deadline."""
    a.acquire("wf")
    deadline = Engine.objects.get(id="engine-a").lease_expires_at + timedelta(seconds=GRACE)
    clock.set(deadline)
    assert isinstance(b.takeover("wf", holder_id="engine-a", epoch=1), NotExpired)
    clock.set(deadline + timedelta(microseconds=1))
    assert b.takeover("wf", holder_id="engine-a", epoch=1) == Acquired("wf", 2, takeover=True)


# -- renew ---------------------------------------------------------------------


def test_renew_extends_the_engine_lease_and_reports_every_claim_renewed(a, b, clock):
    a.acquire("wf-1")
    a.acquire("wf-2")
    clock.advance(TTL)
    result = a.renew()
    assert result.engine_renewed
    assert result.started_at == clock()
    assert result.finished_at is not None and result.finished_at >= result.started_at
    assert result.held == {"wf-1": 1, "wf-2": 1}
    assert result.lost == []
    assert result.outcomes == {"wf-1": "renewed", "wf-2": "renewed"}
    assert (result.renewed_count, result.failed_count) == (2, 0)
    engine = Engine.objects.get(id="engine-a")
    assert engine.lease_expires_at == clock() + timedelta(seconds=TTL)
    assert engine.heartbeat_at == clock()
    # without that renewal the claims would be expired now
    clock.advance(GRACE + 0.001)
    assert isinstance(b.claim("wf-1"), NotExpired)


def test_renew_reports_claims_taken_over_as_lost(a, b, clock, metric):
    a.acquire("wf-1")
    a.acquire("wf-2")
    clock.advance(PAST_DEADLINE)
    assert b.claim("wf-1") == Acquired("wf-1", 2, takeover=True)
    deposed = metric(CLAIM_ATTEMPTS, outcome="deposed")
    failures = metric("weft_workflow_claim_renewal_failures_total")
    with pytest.warns(WeftWorkflowClaimLostWarning) as record:
        result = a.renew()
    assert [w.message.workflow_id for w in record] == ["wf-1"]
    assert result.lost == [Lost("wf-1", 1)]
    assert result.outcomes == {"wf-1": "failed", "wf-2": "renewed"}
    assert (result.renewed_count, result.failed_count) == (1, 1)
    assert a.held == {"wf-2": 1}  # local state dropped
    assert metric(CLAIM_ATTEMPTS, outcome="deposed") == deposed + 1
    assert metric("weft_workflow_claim_renewal_failures_total") == failures + 1
    assert a.cooldown.blocked_until("wf-1") is not None  # cooldown started
    assert a.cooldown.blocked_until("wf-2") is None
    # the claim a kept is still a's, and a's lease is live again
    assert row("wf-2") == (1, "engine-a")
    assert isinstance(b.claim("wf-2"), NotExpired)
    # the loss is reported once
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        assert a.renew().lost == []
    assert again == []


def test_renew_reports_a_revoked_claim_as_lost(a):
    a.acquire("wf")
    assert revoke_statement("default", "wf") == 2
    with pytest.warns(WeftWorkflowClaimLostWarning):
        result = a.renew()
    assert result.lost == [Lost("wf", 1)]
    assert a.held == {}


def test_renew_of_a_stopped_engine_fails(a, metric):
    a.acquire("wf")
    Engine.objects.filter(id="engine-a").update(status=EngineStatus.STOPPED)
    failures = metric("weft_workflow_claim_renewal_failures_total")
    result = a.renew()
    assert not result.engine_renewed
    assert metric("weft_workflow_claim_renewal_failures_total") == failures + 1


def test_renew_skips_the_claim_scan_when_nothing_was_revoked(a, django_assert_num_queries):
    for n in range(3):
        a.acquire(f"wf-{n}")
    with django_assert_num_queries(2):  # the lease UPDATE and the revocations SELECT
        a.renew()


# -- release -------------------------------------------------------------------


def test_release_keeps_the_epoch_and_reports_not_held_afterwards(a, b):
    a.acquire("wf")
    assert a.release("wf") == Released("wf", 1)
    assert row("wf") == (1, None)
    assert Claim.objects.get(workflow_id="wf").claimed_at is None
    assert a.held == {}
    assert a.release("wf") == NotHeld("wf")
    assert a.release("never-seen") == NotHeld("never-seen")


def test_release_of_someone_elses_claim_changes_nothing(a, b, clock):
    a.acquire("wf")
    assert b.release("wf", epoch=1) == NotHeld("wf")
    assert row("wf") == (1, "engine-a")
    clock.advance(PAST_DEADLINE)
    b.claim("wf")
    # a was deposed: its release at its old epoch must not free b's claim
    assert a.release("wf") == NotHeld("wf")
    assert row("wf") == (2, "engine-b")
    assert a.held == {}


def test_release_all_releases_only_this_engines_claims(a, b):
    for n in range(3):
        a.acquire(f"wf-{n}")
    b.acquire("other")
    assert a.release_all() == 3
    assert a.held == {}
    assert [row(f"wf-{n}") for n in range(3)] == [(1, None)] * 3
    assert row("other") == (1, "engine-b")
    assert a.release_all() == 0


# -- wake ownership check --------------------------------------------------------


def test_check_wake_passes_for_the_holder_at_its_epoch(a):
    a.acquire("wf")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert a.check_wake("wf", "timer") is True
    assert record == []
    assert a.held == {"wf": 1}


def test_check_wake_discards_when_another_engine_holds_it(a, b, clock):
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    b.claim("wf")
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as record:
        assert a.check_wake("wf", "signal") is False
    assert [(w.message.workflow_id, w.message.wake_kind) for w in record] == [("wf", "signal")]
    assert a.held == {}


def test_check_wake_compares_the_epoch_not_only_the_engine_id(a, make_registry, clock):
    a.acquire("wf")
    # the claim is released behind a's back and re-taken under the same engine id
    release_statement("default", "wf", "engine-a", 1)
    again = ClaimRegistry("engine-a", timing=a.timing, clock=clock)
    assert again.acquire("wf") == Acquired("wf", 2)
    assert row("wf") == (2, "engine-a")
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as record:
        assert a.check_wake("wf", "update") is False
    assert record[0].message.wake_kind == "update"
    assert a.held == {}
    assert again.check_wake("wf", "update") is True


def test_check_wake_for_a_claim_this_engine_does_not_hold_is_false(a, b):
    b.acquire("wf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # whether a wake for a run never held warns is not pinned
        assert a.check_wake("wf", "child") is False
        assert a.check_wake("nobody", "child") is False
    assert a.held == {}


# -- reads ---------------------------------------------------------------------


def test_read_is_a_typed_result(a, clock):
    assert a.read("missing") is None
    a.acquire("wf")
    state = a.read("wf")
    lease = Engine.objects.get(id="engine-a").lease_expires_at
    assert state == ClaimState("wf", 1, "engine-a", clock(), lease)
    a.release("wf")
    assert a.read("wf") == ClaimState("wf", 1, None, None, None)


# -- cooldown through the registry -------------------------------------------------


def test_every_attempt_is_backoff_skipped_while_in_cooldown(a, b, clock, monotonic, metric):
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    b.claim("wf")
    with pytest.warns(WeftWorkflowClaimLostWarning):
        a.renew()
    until = monotonic() + 5.0  # first loss: CLAIM_RENEW_INTERVAL
    b.release("wf")
    skipped = metric(CLAIM_ATTEMPTS, outcome="backoff_skipped")
    assert a.acquire("wf") == BackoffSkipped("wf", until)
    assert a.claim("wf") == BackoffSkipped("wf", until)
    assert a.takeover("wf", holder_id="engine-b", epoch=2) == BackoffSkipped("wf", until)
    assert metric(CLAIM_ATTEMPTS, outcome="backoff_skipped") == skipped + 3
    assert row("wf") == (2, None)
    # other workflows are not affected
    assert a.acquire("wf-other") == Acquired("wf-other", 1)
    monotonic.value = until
    assert a.claim("wf") == Acquired("wf", 3)
    assert a.cooldown.blocked_until("wf") is None


# -- epochs outlive runs; revocation rotates them -------------------------------------


def test_epoch_survives_deleting_the_run(a):
    WorkflowRun.objects.create(id="wf", workflow_name="t.wf", status=RunStatus.RUNNING)
    a.acquire("wf")
    a.release("wf")
    WorkflowRun.objects.filter(id="wf").delete()
    assert row("wf") == (1, None)
    WorkflowRun.objects.create(id="wf", workflow_name="t.wf")
    assert a.acquire("wf") == Acquired("wf", 2)


def test_revoke_statement_rotates_the_epoch_and_drops_the_holder(a):
    assert revoke_statement("default", "fresh") == 1
    assert row("fresh") == (1, None)
    assert revoke_statement("default", "fresh") == 2
    a.acquire("wf")
    assert revoke_statement("default", "wf") == 2
    assert row("wf") == (2, None)
    assert Claim.objects.get(workflow_id="wf").claimed_at is None
    assert revocations("engine-a") == 1
    assert a.acquire("wf") == Acquired("wf", 3)


def test_a_claim_dropped_locally_but_held_in_the_database_is_readopted(make_registry):
    a = make_registry("engine-a")
    assert a.acquire("wf-stranded") == Acquired("wf-stranded", 1)
    a.forget("wf-stranded")  # e.g. a turn that rolled back its own cancel
    result = a.claim("wf-stranded")
    assert result == Acquired("wf-stranded", 2)
    assert a.epoch_of("wf-stranded") == 2
    state = a.read("wf-stranded")
    assert (state.holder_id, state.epoch) == ("engine-a", 2)
