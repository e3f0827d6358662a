"""fenced(): every workflow-scoped write commits only while this engine owns the run."""

from __future__ import annotations

import pytest
from django.db import transaction

from weft_django.conf import get_settings
from weft_django.exceptions import EngineDeposedError, WeftWorkflowClaimLostWarning
from weft_django.models import GlobalLease, RunStatus, WorkflowEvent, WorkflowRun, WorkflowSignal
from weft_django.ownership.claims.registry import release_statement
from weft_django.ownership.claims.revoke import revoke_statement
from weft_django.ownership.leases.engines import register_engine
from weft_django.ownership.leases.store import GlobalLeaseManager
from weft_django.ownership.modes import ownership_for
from weft_django.ownership.writes.fence import fenced, fenced_by_global_lease
from weft_django.ownership.writes.requests import Checkpoint, Fence
from weft_django.ownership.writes.single import fenced_insert

PAST_DEADLINE = 30 + 10 + 0.001


@pytest.fixture
def run(db) -> WorkflowRun:
    return WorkflowRun.objects.create(id="wf", workflow_name="t.wf", status=RunStatus.RUNNING)


def write_everything(run: WorkflowRun, seq: int, engine_id: str, epoch: int) -> None:
    """What a turn writes: an event, a consumed signal, a status change."""
    WorkflowEvent.objects.create(run=run, seq=seq, kind="step", engine_id=engine_id, epoch=epoch)
    WorkflowSignal.objects.create(run=run, signal_id=f"s{seq}", name="go")
    WorkflowRun.objects.filter(id=run.id).update(status=RunStatus.WAITING)


def nothing_written(run: WorkflowRun) -> bool:
    return (
        not WorkflowEvent.objects.filter(run=run).exists()
        and not WorkflowSignal.objects.filter(run=run).exists()
        and WorkflowRun.objects.get(id=run.id).status == RunStatus.RUNNING
    )


def test_fenced_commits_while_the_claim_is_held(make_registry, run):
    a = make_registry("engine-a")
    a.acquire("wf")
    with fenced(Fence("wf", "engine-a", 1)):
        write_everything(run, 1, "engine-a", 1)
    assert list(WorkflowEvent.objects.values_list("seq", "engine_id", "epoch")) == [
        (1, "engine-a", 1)
    ]
    assert WorkflowRun.objects.get(id="wf").status == RunStatus.WAITING


def test_a_deposed_engines_write_is_refused_and_rolled_back_entirely(make_registry, clock, run):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    assert b.claim("wf").epoch == 2
    entered = []
    with (
        pytest.raises(EngineDeposedError) as excinfo,
        fenced(Fence("wf", "engine-a", 1)),
    ):
        entered.append(True)
        write_everything(run, 1, "engine-a", 1)
    assert excinfo.value.workflow_id == "wf"
    assert entered == []
    assert nothing_written(run)
    # the new owner writes at its epoch
    with fenced(Fence("wf", "engine-b", 2)):
        write_everything(run, 1, "engine-b", 2)
    assert list(WorkflowEvent.objects.values_list("engine_id", "epoch")) == [("engine-b", 2)]


def test_the_refusal_rolls_back_the_callers_enclosing_transaction_too(make_registry, clock, run):
    """User ORM writes made in the same transaction before the fenced block (a
    ``transactional=True`` step) go as well when the deposition propagates."""
    a = make_registry("engine-a")
    a.acquire("wf")
    revoke_statement("default", "wf")  # cancelled by another process
    with (
        pytest.raises(EngineDeposedError),
        transaction.atomic(),
    ):
        WorkflowRun.objects.create(id="user-row", workflow_name="user.write")
        with fenced(Fence("wf", "engine-a", 1)):
            write_everything(run, 1, "engine-a", 1)
    assert not WorkflowRun.objects.filter(id="user-row").exists()
    assert nothing_written(run)


def test_same_engine_at_a_stale_epoch_is_refused(make_registry, run):
    a = make_registry("engine-a")
    a.acquire("wf")
    a.release("wf")
    a.acquire("wf")  # epoch 2
    with (
        pytest.raises(EngineDeposedError),
        fenced(Fence("wf", "engine-a", 1)),
    ):
        write_everything(run, 1, "engine-a", 1)
    assert nothing_written(run)


@pytest.mark.parametrize("how", ["released", "revoked", "never_claimed"])
def test_no_holder_means_no_write(make_registry, run, how):
    a = make_registry("engine-a")
    if how != "never_claimed":
        a.acquire("wf")
        if how == "released":
            release_statement("default", "wf", "engine-a", 1)
        else:
            revoke_statement("default", "wf")
    with (
        pytest.raises(EngineDeposedError),
        fenced(Fence("wf", "engine-a", 1)),
    ):
        write_everything(run, 1, "engine-a", 1)
    assert nothing_written(run)


def test_an_error_inside_the_block_rolls_back_its_writes(make_registry, run):
    a = make_registry("engine-a")
    a.acquire("wf")
    with (
        pytest.raises(ZeroDivisionError),
        fenced(Fence("wf", "engine-a", 1)),
    ):
        write_everything(run, 1, "engine-a", 1)
        1 / 0  # noqa: B018
    assert nothing_written(run)


def test_a_lost_claim_is_refused_even_before_the_owner_notices(make_registry, clock, run):
    """Fencing does not depend on the owner's renewal having reported the loss."""
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    b.claim("wf")
    assert a.held == {"wf": 1}  # a has not renewed yet
    with (
        pytest.raises(EngineDeposedError),
        fenced(Fence("wf", "engine-a", a.epoch_of("wf"))),
    ):
        write_everything(run, 1, "engine-a", 1)
    with pytest.warns(WeftWorkflowClaimLostWarning):
        a.renew()
    assert nothing_written(run)


def test_mode_none_does_not_fence(db, weft_settings, run):
    weft_settings(OWNERSHIP="none")
    with ownership_for("anyone", get_settings()).fenced(Fence("wf", "anyone", 0)):
        write_everything(run, 1, "anyone", 0)
    assert WorkflowEvent.objects.count() == 1


def test_lease_mode_fences_on_the_global_lease_epoch(db, weft_settings, clock, run):
    weft_settings(OWNERSHIP="lease")
    config = get_settings()
    for engine_id in ("engine-a", "engine-b"):
        register_engine(config, engine_id=engine_id, kind="test", now=clock())
    a = GlobalLeaseManager("engine-a", config.lease_timing, clock=clock)
    b = GlobalLeaseManager("engine-b", config.lease_timing, clock=clock)
    assert a.try_acquire()
    # no per-workflow claim row is involved in mode lease
    with fenced_by_global_lease(Fence("wf", "engine-a", a.epoch)):
        write_everything(run, 1, "engine-a", 1)
    assert WorkflowEvent.objects.count() == 1
    with (
        pytest.raises(EngineDeposedError),
        fenced_by_global_lease(Fence("wf", "engine-a", a.epoch + 1)),
    ):  # a lease holder at the wrong epoch
        WorkflowEvent.objects.create(run=run, seq=2, kind="step")
    clock.advance(PAST_DEADLINE)
    assert b.try_acquire()
    assert b.epoch == 2
    with (
        pytest.raises(EngineDeposedError),
        fenced_by_global_lease(Fence("wf", "engine-a", 1)),
    ):
        WorkflowEvent.objects.create(run=run, seq=2, kind="step")
    assert list(WorkflowEvent.objects.values_list("seq", flat=True)) == [1]
    with fenced_by_global_lease(Fence("wf", "engine-b", 2)):
        WorkflowEvent.objects.create(run=run, seq=2, kind="step")
    assert list(WorkflowEvent.objects.values_list("seq", flat=True)) == [1, 2]
    assert GlobalLease.objects.get().holder_id == "engine-b"


def test_lease_mode_refuses_everyone_when_nobody_holds_the_lease(db, weft_settings, clock, run):
    weft_settings(OWNERSHIP="lease")
    config = get_settings()
    register_engine(config, engine_id="engine-a", kind="test", now=clock())
    a = GlobalLeaseManager("engine-a", config.lease_timing, clock=clock)
    assert a.try_acquire()
    assert a.release()
    with (
        pytest.raises(EngineDeposedError),
        fenced_by_global_lease(Fence("wf", "engine-a", 1)),
    ):
        write_everything(run, 1, "engine-a", 1)
    assert nothing_written(run)


def _rows(engine_id: str, epoch: int, *seqs: int) -> list[tuple]:
    from django.utils import timezone

    return [("wf", seq, "step", "s", "1", None, engine_id, epoch, timezone.now()) for seq in seqs]


def test_one_statement_insert_writes_every_row_while_held(make_registry, run):
    a = make_registry("engine-a")
    a.acquire("wf")
    assert fenced_insert(
        "default", Fence("wf", "engine-a", 1), Checkpoint(_rows("engine-a", 1, 0, 1))
    )
    assert list(WorkflowEvent.objects.order_by("seq").values_list("seq", "result")) == [
        (0, 1),
        (1, 1),
    ]


def test_one_statement_insert_after_a_takeover_writes_nothing(make_registry, clock, run):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    a.acquire("wf")
    clock.advance(PAST_DEADLINE)
    assert b.claim("wf").epoch == 2
    assert (
        fenced_insert("default", Fence("wf", "engine-a", 1), Checkpoint(_rows("engine-a", 1, 0)))
        is False
    )
    assert not WorkflowEvent.objects.exists()


@pytest.mark.parametrize("engine_id", ["", "engine-a"])
def test_one_statement_insert_against_an_unheld_claim_writes_nothing(run, engine_id):
    """No engine id holds an unheld claim, not even the empty one (on
    PostgreSQL this is the grouped fenced write's statement)."""
    from weft_django.models import Claim

    Claim.objects.create(workflow_id="wf", epoch=1, holder=None)
    written = fenced_insert("default", Fence("wf", engine_id, 1), Checkpoint(_rows("x", 1, 0)))
    assert written is False
    assert not WorkflowEvent.objects.exists()
