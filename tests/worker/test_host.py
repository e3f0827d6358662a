"""The Worker driven in-process: lifecycle, passes, errors, shutdown (docs/ownership.md).

Each test runs ``Worker.run()`` in a thread of its own (so
``install_signal_handlers=False``) with short timings, and stops it with
``stop()`` from the test's thread. Worker threads use their own database
connections, so every test is ``transaction=True``.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Collection
from typing import Any

import pytest
from django.db import OperationalError

import weft_django as weft
from weft_django.models import (
    Claim,
    Engine,
    EngineKind,
    EngineStatus,
    OwnershipMarker,
    RunStatus,
    WorkflowRun,
)
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.claims.results import LostRace
from weft_django.ownership.clock import db_now
from weft_django.ownership.modes import WorkflowLeaseOwnership
from weft_django.ownership.passes import takeover
from weft_django.ownership.passes.outcomes import PassResult
from weft_django.runtime import registry
from weft_django.runtime.engine import TurnOutcome, WorkflowEngine
from weft_django.runtime.passes.renewal import EnginePasses
from weft_django.runtime.prefetch import FirstTurnReads
from weft_django.worker import Worker
from weft_django.worker.supervision import RenewalWatch

from ..workers import RENEW, Passes, Running, completed, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _ownerless_waiter(run_id: str) -> str:
    """A run parked on a signal whose engine shut down gracefully: no holder."""
    weft.start("tw.waiter", workflow_id=run_id)
    engine = WorkflowEngine(kind=EngineKind.TEST).start()
    engine.claim_and_drive(run_id)
    assert WorkflowRun.objects.get(pk=run_id).status == RunStatus.WAITING
    engine.shutdown()
    assert Claim.objects.get(workflow_id=run_id).holder_id is None
    return run_id


# -- lifecycle ----------------------------------------------------------------------


def test_run_and_stop_from_another_thread(start_worker):
    running = start_worker()
    engine_id = running.worker.engine.engine_id
    assert Engine.objects.get(id=engine_id).status == EngineStatus.RUNNING
    run_ids = [weft.start("tw.steps", 3).id for _ in range(5)]
    wait_for(lambda: completed(run_ids), 15, "the runs to complete")
    running.stop()
    assert running.returned == 0
    engine = Engine.objects.get(id=engine_id)
    assert engine.status == EngineStatus.STOPPED
    assert engine.stopped_at is not None
    assert running.worker.pool.turns_done >= 5


def test_once_exits_when_idle(fast):
    run_ids = [weft.start("tw.steps", 2).id for _ in range(4)]
    running = Running(Worker(once=True, install_signal_handlers=False, concurrency=2))
    running.join(30)
    assert running.returned == 0
    assert completed(run_ids)
    engine = Engine.objects.get(id=running.worker.engine.engine_id)
    assert engine.status == EngineStatus.STOPPED


def test_once_with_nothing_to_do_exits_at_once(fast):
    began = time.monotonic()
    running = Running(Worker(once=True, install_signal_handlers=False))
    running.join(15)
    assert running.returned == 0
    assert time.monotonic() - began < 5


def test_once_leaves_parked_runs_parked(fast):
    run_id = weft.start("tw.waiter").id
    running = Running(Worker(once=True, install_signal_handlers=False))
    running.join(15)
    assert WorkflowRun.objects.get(pk=run_id).status == RunStatus.WAITING
    assert Claim.objects.get(workflow_id=run_id).holder_id is None  # released at shutdown


def test_graceful_shutdown_releases_every_claim(start_worker, caplog):
    caplog.set_level(logging.INFO, logger="weft_django.worker")
    running = start_worker()
    run_ids = [weft.start("tw.waiter").id for _ in range(3)]
    engine_id = running.worker.engine.engine_id
    wait_for(
        lambda: (
            Claim.objects.filter(holder_id=engine_id).count() == 3
            and WorkflowRun.objects.filter(pk__in=run_ids, status=RunStatus.WAITING).count() == 3
        ),
        10,
        "the runs to park",
    )
    running.stop()
    assert not Claim.objects.filter(holder__isnull=False).exists()
    assert set(Claim.objects.values_list("epoch", flat=True)) == {1}  # epoch unchanged
    assert "released 3 claim(s)" in caplog.text


def test_boot_failure_after_registration_marks_the_engine_stopped(fast):
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        worker = Worker(install_signal_handlers=False, metrics_port=port)
        with pytest.raises(OSError):
            worker.run()
    engine = Engine.objects.get(id=worker.engine.engine_id)
    assert engine.status == EngineStatus.STOPPED


def test_concurrency_must_be_positive():
    with pytest.raises(ValueError, match="concurrency"):
        Worker(concurrency=0)


# -- passes -------------------------------------------------------------------------


def test_pass_order_and_on_pass_results(fast, start_worker):
    fast(TICK_INTERVAL=30.0, NOTIFY=False)  # only the signal poll can deliver a signal
    ownerless = _ownerless_waiter("ownerless-1")
    passes = Passes()
    running = start_worker(on_pass=passes)

    wait_for(lambda: passes.named("reclaim") and passes.named("signal_poll"), 10, "passes")
    reclaimed = next(p for p in passes.named("reclaim") if p.outcomes)
    assert reclaimed.outcomes == {ownerless: "reclaimed"}
    assert reclaimed.counts["reclaimed"] == 1
    assert reclaimed.finished_at is not None and reclaimed.finished_at >= reclaimed.started_at
    engine_id = running.worker.engine.engine_id
    wait_for(lambda: Claim.objects.filter(workflow_id=ownerless, holder_id=engine_id).exists())

    # A parked run with nothing due is held again without a turn (its turn would
    # only park it again), so the signal below is delivered by the poll under test.
    worker = running.worker
    time.sleep(0.3)
    assert worker.pool.turns_done == 0
    # Parked and held: the signal poll counts it not_buffered until a signal is stored
    # (counted, not listed: the poll reads only the buffered signals).
    wait_for(
        lambda: any(
            p.counts["not_buffered"] == 1 and not p.outcomes for p in passes.named("signal_poll")
        ),
        10,
        "a not_buffered count",
    )
    weft.signal(ownerless, "go", "hello")
    wait_for(lambda: completed([ownerless]), 10, "the signal poll to deliver the signal")
    # (The turn can finish before the pass that woke it has published its result.)
    woken = wait_for(
        lambda: [p for p in passes.named("signal_poll") if p.outcomes.get(ownerless) == "woken"],
        5,
        "the woken outcome",
    )
    assert len(woken) == 1 and woken[0].count("woken") == 1

    renewals = passes.named("renew")
    assert renewals and all(p.finished_at is not None for p in renewals)
    assert any(p.outcomes.get(ownerless) == "renewed" for p in renewals)
    running.stop()

    # The renewal thread runs pass 1 only; the scan thread passes 2, 3, 4, in order.
    assert set(passes.by_thread("weft-renewal")) == {"renew"}
    scans = passes.by_thread("weft-scans")
    cycle = ["reclaim", "signal_poll", "update_poll"]
    assert scans[: len(cycle)] == cycle
    for index, name in enumerate(scans):
        assert name == cycle[index % len(cycle)], scans
    assert running.worker.last_passes.keys() >= {"renew", *cycle}

    # Each round of passes leaves its summaries on the engine row, for the admin.
    recorded = Engine.objects.get(id=running.worker.engine.engine_id).passes
    assert recorded.keys() >= {"renew", *cycle}
    assert recorded["signal_poll"]["pass"] == "signal_poll"
    assert recorded["renew"]["engine_id"] == running.worker.engine.engine_id
    assert sum(recorded["renew"]["counts"].values()) >= 0
    assert recorded["reclaim"]["finished_at"] >= recorded["reclaim"]["started_at"]


def test_database_error_in_a_pass_is_logged_and_the_loop_continues(
    start_worker, monkeypatch, caplog
):
    caplog.set_level(logging.WARNING, logger="weft_django.worker")
    real = EnginePasses.reclaim
    calls: list[int] = []

    def flaky_scan(self: EnginePasses) -> PassResult:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("simulated: server closed the connection unexpectedly")
        return real(self)

    monkeypatch.setattr(EnginePasses, "reclaim", flaky_scan)
    passes = Passes()
    running = start_worker(on_pass=passes)
    wait_for(lambda: len(passes.named("reclaim")) >= 2, 10, "two reclaim passes after the error")
    assert "reclaim: database error, retried next time: simulated" in caplog.text
    run_ids = [weft.start("tw.steps", 2).id for _ in range(3)]
    wait_for(lambda: completed(run_ids), 10, "runs to complete after the error")
    assert all(t.is_alive() for t in running.worker.supervisor.threads)


def test_database_error_in_the_tick_and_renewal_is_retried(start_worker, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="weft_django.worker")
    failures = {"tick": 1, "renew": 1}
    real_claim_pending = WorkflowLeaseOwnership.claim_pending
    real_renew_pass = Worker._renew_pass

    def claim_pending(self: WorkflowLeaseOwnership, *args: Any) -> list[str]:
        if failures["tick"]:
            failures["tick"] -= 1
            raise OperationalError("simulated tick failure")
        return real_claim_pending(self, *args)

    def renew_pass(self: Worker) -> PassResult:
        if failures["renew"]:
            failures["renew"] -= 1
            raise OperationalError("simulated renewal failure")
        return real_renew_pass(self)

    monkeypatch.setattr(WorkflowLeaseOwnership, "claim_pending", claim_pending)
    monkeypatch.setattr(Worker, "_renew_pass", renew_pass)
    passes = Passes()
    start_worker(on_pass=passes)
    run_ids = [weft.start("tw.steps", 2).id for _ in range(3)]
    wait_for(lambda: completed(run_ids), 10, "runs to complete after the errors")
    wait_for(lambda: passes.named("renew"), 5, "a renewal after the failed one")
    assert "tick: database error, retried next time: simulated tick failure" in caplog.text
    assert "renew: database error, retried next time: simulated renewal failure" in caplog.text


def test_a_retry_survives_a_tick_that_fails_on_the_database(start_worker, monkeypatch):
    """An abandoned turn waits in the retry set; a tick that takes the set and then
    fails on the database (a terminated connection) must not lose the retry."""
    run_id = weft.start("tw.steps", 2).id
    state: dict[str, float] = {"abandon": 1, "fail_until": 0.0}
    real_drive = WorkflowEngine.drive
    real_due_runs = WorkflowLeaseOwnership.due_runs

    def drive(self: WorkflowEngine, rid: str) -> TurnOutcome:
        if rid == run_id and state["abandon"]:
            state["abandon"], state["fail_until"] = 0, time.monotonic() + 1.5
            # What a turn cut off by a terminated connection leaves: running, held.
            WorkflowRun.objects.filter(pk=rid).update(status=RunStatus.RUNNING)
            self.backoff.failed(rid)
            return TurnOutcome.ABANDONED
        return real_drive(self, rid)

    def due_runs(self: WorkflowLeaseOwnership, *args: Any, **kwargs: Any) -> list[str]:
        if time.monotonic() < state["fail_until"]:
            raise OperationalError("terminating connection due to administrator command")
        return real_due_runs(self, *args, **kwargs)

    monkeypatch.setattr(WorkflowEngine, "drive", drive)
    monkeypatch.setattr(WorkflowLeaseOwnership, "due_runs", due_runs)
    start_worker(on_pass=None)
    wait_for(lambda: completed([run_id]), 10, "the abandoned run to be retried")
    assert state["abandon"] == 0


def test_a_retry_survives_a_renewal_lapse_between_the_tick_and_its_submit(
    start_worker, monkeypatch
):
    """The tick takes the retry set, then driving pauses (the renewal lapsed) before
    the retried run is queued: the run must wait for the next retry, not be dropped
    while it stays held and running."""
    run_id = weft.start("tw.steps", 2).id
    state = {"abandon": 1, "lapse": 0}
    real_drive = WorkflowEngine.drive
    real_allows = RenewalWatch.allows_driving

    def drive(self: WorkflowEngine, rid: str) -> TurnOutcome:
        if rid == run_id and state["abandon"]:
            state["abandon"] = 0
            WorkflowRun.objects.filter(pk=rid).update(status=RunStatus.RUNNING)
            state["lapse"] = 2  # the next tick may drive; its submit may not
            return TurnOutcome.ABANDONED
        return real_drive(self, rid)

    def allows_driving(self: RenewalWatch) -> bool:
        if state["lapse"]:
            state["lapse"] -= 1
            if state["lapse"] == 0:
                return False
        return real_allows(self)

    monkeypatch.setattr(WorkflowEngine, "drive", drive)
    monkeypatch.setattr(RenewalWatch, "allows_driving", allows_driving)
    start_worker(on_pass=None)
    wait_for(lambda: completed([run_id]), 10, "the retried run to be driven after the lapse")
    assert state == {"abandon": 0, "lapse": 0}


def test_a_stopping_worker_does_not_queue_a_retry():
    worker = Worker(install_signal_handlers=False, concurrency=1)
    worker.engine.stopping.set()
    assert worker._submit("never-driven") is False
    assert worker.pool.take_retries() == set()


# -- stopping -----------------------------------------------------------------------


def test_stop_marks_the_engine_disposing_before_in_flight_passes_can_claim(
    start_worker, monkeypatch
):
    run_id = _ownerless_waiter("ownerless-2")
    entered, release = threading.Event(), threading.Event()
    real = takeover.take_ownerless

    def gated(claims: ClaimRegistry, run_ids: list[str], *args: Any) -> Any:
        # Hold the reclaim scan right before it claims the run, so the pass is
        # in flight when stop() is called.
        if threading.current_thread().name == "weft-scans" and run_id in run_ids:
            entered.set()
            release.wait(10)
        return real(claims, run_ids, *args)

    monkeypatch.setattr(takeover, "take_ownerless", gated)
    passes = Passes()
    running = start_worker(on_pass=passes)
    assert entered.wait(10), "the reclaim pass never reached the run"

    running.worker.stop()
    engine = running.worker.engine
    assert engine.stopping.is_set() and engine.ownership.claims.disposing
    release.set()
    running.join(20)

    assert Claim.objects.get(workflow_id=run_id).holder_id is None
    reclaim = [p.outcomes.get(run_id) for p in passes.named("reclaim") if run_id in p.outcomes]
    assert reclaim == ["lost_race"]
    assert WorkflowRun.objects.get(pk=run_id).status == RunStatus.WAITING
    assert Engine.objects.get(id=engine.engine_id).status == EngineStatus.STOPPED


def test_after_stop_nothing_is_claimed_or_submitted(start_worker):
    running = start_worker(on_pass=None)
    worker = running.worker
    worker.stop()
    pending = weft.start("tw.steps").id
    assert isinstance(worker.engine.acquire(pending), LostRace)
    assert worker._submit(pending) is False
    running.join(20)
    assert WorkflowRun.objects.get(pk=pending).status == RunStatus.PENDING
    assert not Claim.objects.filter(workflow_id=pending, holder__isnull=False).exists()


# -- mode lease ---------------------------------------------------------------------


def test_lease_mode_recovers_runs_left_running_by_a_dead_holder(fast, start_worker):
    OwnershipMarker.objects.all().delete()
    fast(OWNERSHIP="lease", LEASE_TTL=1.0, LEASE_RENEW_INTERVAL=RENEW)
    run_id = weft.start("tw.steps", 3).id
    # What a holder that died mid-turn leaves: running, no wake hint, no timer.
    WorkflowRun.objects.filter(pk=run_id).update(status=RunStatus.RUNNING)
    passes = Passes()
    start_worker(on_pass=passes)
    wait_for(lambda: completed([run_id]), 10, "the orphaned run to be driven")
    assert any(p.outcomes.get(run_id) == "reclaimed" for p in passes.named("reclaim"))


def test_lease_mode_tick_ignores_due_runs_of_unregistered_types(fast):
    fast(OWNERSHIP="lease")
    now = db_now()
    WorkflowRun.objects.create(
        id="alien", workflow_name="tw.not_registered_here", status=RunStatus.WAITING, wake_at=now
    )
    mine = weft.start("tw.waiter").id
    WorkflowRun.objects.filter(pk=mine).update(status=RunStatus.WAITING, wake_at=now)
    worker = Worker(install_signal_handlers=False)
    assert worker.ownership.due_runs(now, registry.registered_names(), limit=100) == [mine]


# -- connections ------------------------------------------------------------------------


def test_recycle_keeps_a_healthy_connection_and_drops_a_broken_one(monkeypatch):
    from django.db import connection

    from weft_django.worker.pool import recycle_connections

    assert connection.settings_dict["CONN_MAX_AGE"] == 0  # Django's default
    connection.ensure_connection()
    raw = connection.connection
    recycle_connections()  # close_old_connections() would close it (CONN_MAX_AGE = 0)
    assert connection.connection is raw
    connection.errors_occurred = True
    monkeypatch.setattr(connection, "is_usable", lambda: False)
    recycle_connections()
    assert connection.connection is None


@pytest.mark.django_db(transaction=False)
def test_recycle_leaves_a_callers_transaction_alone():
    from django.db import connection

    from weft_django.worker.pool import recycle_connections

    assert connection.in_atomic_block  # the test's own transaction
    raw = connection.connection
    recycle_connections()
    assert connection.connection is raw


def test_new_runs_are_read_ahead_once_per_batch_and_a_failed_read_loses_none(
    start_worker, monkeypatch, caplog
):
    """The tick reads the first turns of the runs it claimed in one statement;
    when that read fails on the database the claimed runs are still queued and
    their turns read for themselves."""
    caplog.set_level(logging.WARNING, logger="weft_django.engine")
    batches: list[list[str]] = []
    failures = {"left": 1}
    real_load = FirstTurnReads.load

    def load(self: FirstTurnReads, run_ids: Collection[str]) -> int:
        batches.append(list(run_ids))
        if failures["left"]:
            failures["left"] -= 1
            raise OperationalError("simulated read-ahead failure")
        return real_load(self, run_ids)

    monkeypatch.setattr(FirstTurnReads, "load", load)
    start_worker()
    first = [weft.start("tw.steps", 2).id for _ in range(3)]
    wait_for(lambda: completed(first), 10, "the runs whose read ahead failed to complete")
    second = [weft.start("tw.steps", 2).id for _ in range(3)]
    wait_for(lambda: completed(second), 10, "the next runs to complete")
    assert "could not read" in caplog.text and "simulated read-ahead failure" in caplog.text
    assert sorted(run for batch in batches for run in batch) == sorted(first + second)


def test_a_due_run_read_before_its_turn_ended_is_not_driven_again(start_worker, monkeypatch):
    """The due-runs query can read a claimed new run as still pending while its
    first turn is parking it; when the turn has ended by the time the query
    returns, the tick must not take that stale row for a wake-up and drive the
    run a second time."""
    run_id = weft.start("tw.waiter").id
    in_turn, turn_ended = threading.Event(), threading.Event()
    drives: list[str] = []
    real_drive = WorkflowEngine.drive
    real_due_runs = WorkflowLeaseOwnership.due_runs

    def drive(self: WorkflowEngine, rid: str) -> TurnOutcome:
        drives.append(rid)
        if rid != run_id:
            return real_drive(self, rid)
        in_turn.set()
        time.sleep(0.1)  # long enough for a few due checks of the fast tick
        try:
            return real_drive(self, rid)
        finally:
            turn_ended.set()

    def due_runs(self: WorkflowLeaseOwnership, *args: Any, **kwargs: Any) -> list[str]:
        if not in_turn.is_set() or turn_ended.is_set():
            return real_due_runs(self, *args, **kwargs)
        # The query's snapshot: the run held by this engine and still pending;
        # it returns after the turn has parked the run.
        rows = real_due_runs(self, *args, **kwargs)
        turn_ended.wait(5)
        return rows

    monkeypatch.setattr(WorkflowEngine, "drive", drive)
    monkeypatch.setattr(WorkflowLeaseOwnership, "due_runs", due_runs)
    running = start_worker(on_pass=None)
    wait_for(
        lambda: WorkflowRun.objects.filter(pk=run_id, status=RunStatus.WAITING).exists(),
        10,
        "the run to park",
    )
    wait_for(lambda: running.worker.pool.idle(), 5, "the queue to drain")
    time.sleep(0.2)  # ten more ticks: any second turn would have been queued by now
    assert drives.count(run_id) == 1


def test_the_stop_signals_are_handled_before_the_engine_row_exists(
    fast, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM right after the engine registered (as a supervisor may send) is a
    graceful stop: the handlers are in place before the row is written."""
    from weft_django.worker import host

    order: list[str] = []
    monkeypatch.setattr(host, "on_stop_signals", lambda stop, grace: order.append("handlers"))
    worker = Worker(once=True)
    real_start = worker.engine.start

    def start() -> object:
        order.append("engine row")
        return real_start()

    monkeypatch.setattr(worker.engine, "start", start)
    assert worker.run() == 0
    assert order == ["handlers", "engine row"]


def test_a_stop_asked_before_boot_ends_the_worker_cleanly(fast) -> None:
    """stop() before run() (a signal that arrives while the worker boots): run()
    returns 0 and the engine row it registered ends stopped."""
    worker = Worker(install_signal_handlers=False)
    worker.stop()
    assert worker.run() == 0
    assert Engine.objects.get(id=worker.engine.engine_id).status == EngineStatus.STOPPED
