"""Every way a claim is let go of, with real worker processes (docs/ownership.md,
"The release rule"): a released run that is due is picked up by a live worker
within a fast tick, the others within one reclaim pass; a run that ended (cancel,
purge) is never picked up again.

Issue 24: a run suspended while parked and then resumed sat ``waiting`` with no
owner next to two live workers, a signal buffered, until the 600 s full sweep
found it: ``resume`` goes through the revoke path, which left the claim without
the ``released_at`` stamp the per-pass scan reads. Here the workers renew (and
so run their reclaim pass) only every 20 s, so a resumed run that is picked up
within a few seconds was found by the fast tick, and one left to the 600 s
sweep is not picked up at all.
"""

from __future__ import annotations

import signal
import time

import pytest
from django.db.models.functions import Now

import weft_django as weft
from tests.integration.helpers import FAST
from tests.integration.itapp.models import StepExecution
from tests.integration.queries import all_completed, duplicates, events_by, holder
from weft_django.models import Claim, RunStatus, WorkflowEvent, WorkflowRun

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Slow passes: the reclaim scan, the signal poll and the renewal every 20 s (the
# TTL must be 3 x that), a fast tick every 0.1 s. Only the tick (and NOTIFY, or
# SQLite's change watch) can pick a run up within PICKUP seconds (half the
# passes' 20 s: room for a loaded CI machine, never the slow passes' doing).
SLOW = {"WEFT_CLAIM_RENEW_INTERVAL": "20", "WEFT_CLAIM_TTL": "60"}
PICKUP = 10.0
RENEW = float(FAST["WEFT_CLAIM_RENEW_INTERVAL"])
TTL = float(FAST["WEFT_CLAIM_TTL"])
# A parked run with nothing due is taken by the next reclaim pass: one renew
# interval, plus room for two busy cores.
PASS_BOUND = 2 * RENEW + 2.0


def _claim(run_id: str) -> tuple[str | None, int, object]:
    return Claim.objects.filter(pk=run_id).values_list("holder_id", "epoch", "released_at").get()


def _park(wait, run_id: str, engines: set[str]) -> str:
    """Start an ``it.waiter`` run and wait until one of ``engines`` holds it parked."""
    weft.start("it.waiter", workflow_id=run_id)

    def parked() -> str | None:
        status = WorkflowRun.objects.filter(pk=run_id).values_list("status", flat=True).first()
        owner = holder(run_id)
        return owner if status == RunStatus.WAITING and owner in engines else None

    return wait(parked, 30, what=f"{run_id} to park on a worker")


def _resumed_by(run_id: str) -> set[int]:
    return set(
        StepExecution.objects.filter(run_id=run_id, step="resumed").values_list("pid", flat=True)
    )


def test_a_resumed_run_is_picked_up_by_a_live_worker_within_a_tick(workers, wait):
    a, b = workers.start("a", **SLOW), workers.start("b", **SLOW)
    live = {a.engine_id, b.engine_id}
    run_id = "resume-1"
    _park(wait, run_id, live)
    weft.suspend(run_id)
    weft.resume(run_id)
    resumed_at = time.monotonic()
    _owner, epoch, _stamp = _claim(run_id)

    def picked() -> str | None:
        owner, now_epoch, _stamp = _claim(run_id)
        return owner if owner in live and now_epoch > epoch else None

    owner = wait(picked, PICKUP, interval=0.02, what="a live worker to pick up the resumed run")
    print(f"resumed run held by {owner} after {time.monotonic() - resumed_at:.2f}s")
    # Its turn replayed it up to its wait again: parked, held, nothing lost.
    wait(
        lambda: WorkflowRun.objects.filter(pk=run_id, status=RunStatus.WAITING).exists(),
        PICKUP,
        what="the resumed run to park again",
    )
    weft.signal(run_id, "go", {"n": 1})
    wait(lambda: all_completed([run_id]), PICKUP, what="the resumed run to complete")
    assert duplicates([run_id]) == {}


def test_suspend_then_resume_with_a_buffered_signal_completes_within_a_tick(workers, wait):
    a, b = workers.start("a", **SLOW), workers.start("b", **SLOW)
    runs = [f"buffered-{n}" for n in range(3)]
    for run_id in runs:
        _park(wait, run_id, {a.engine_id, b.engine_id})
    for run_id in runs:
        weft.suspend(run_id)
        weft.signal(run_id, "go", {"run": run_id})  # buffered: the run is suspended
    time.sleep(0.5)  # a suspended run is not driven, signal or not
    assert not any(_resumed_by(run_id) for run_id in runs)
    started = time.monotonic()
    for run_id in runs:
        weft.resume(run_id)
    wait(lambda: all_completed(runs), PICKUP, what="the resumed runs to take their signals")
    print(f"3 resumed runs completed {time.monotonic() - started:.2f}s after resume")
    assert duplicates(runs) == {}
    for run_id in runs:
        assert _resumed_by(run_id) <= {a.pid, b.pid} and _resumed_by(run_id)
        assert WorkflowRun.objects.get(pk=run_id).result == {"run": run_id}
        assert _claim(run_id)[0] is None and _claim(run_id)[2] is None  # ended: not stamped


def test_a_cancelled_run_is_not_picked_up_again(workers, wait):
    a, b = workers.start("a"), workers.start("b")
    run_id = "cancel-1"
    _park(wait, run_id, {a.engine_id, b.engine_id})
    weft.cancel(run_id)
    _owner, epoch, _stamp = _claim(run_id)
    events = WorkflowEvent.objects.filter(run_id=run_id).count()
    # A stale wake hint (as a signal that raced the cancel could leave) and a due
    # timer: the tick's query reads the run, and must not take it.
    WorkflowRun.objects.filter(pk=run_id).update(wake_hint_at=Now(), wake_at=Now())
    time.sleep(3 * RENEW + 0.5)  # three reclaim passes and many ticks of each worker
    assert _claim(run_id) == (None, epoch, None)
    assert WorkflowRun.objects.get(pk=run_id).status == RunStatus.CANCELLED
    assert WorkflowEvent.objects.filter(run_id=run_id).count() == events


def test_a_purged_run_is_not_picked_up_and_a_new_run_of_its_id_is(workers, wait):
    a, b = workers.start("a"), workers.start("b")
    run_id = "purge-1"
    _park(wait, run_id, {a.engine_id, b.engine_id})
    weft.purge(run_id)
    _owner, epoch, _stamp = _claim(run_id)
    time.sleep(3 * RENEW + 0.5)
    assert _claim(run_id) == (None, epoch, None)  # the epoch survives, nobody holds it
    assert not WorkflowRun.objects.filter(pk=run_id).exists()

    _park(wait, run_id, {a.engine_id, b.engine_id})  # the same id, a new run
    assert _claim(run_id)[1] > epoch
    weft.signal(run_id, "go", {"again": True})
    wait(lambda: all_completed([run_id]), 30, what="the new run to complete")
    assert WorkflowRun.objects.get(pk=run_id).result == {"again": True}


def test_a_graceful_stop_hands_a_due_run_to_the_other_worker_within_a_tick(workers, wait):
    a = workers.start("a", **SLOW)
    run_id = "stop-1"
    _park(wait, run_id, {a.engine_id})
    b = workers.start("b", **SLOW)
    time.sleep(1.0)  # b's first reclaim pass (a full sweep) has run; its next is 20 s away
    a.send(signal.SIGTERM)
    assert a.wait(15) == 0
    assert _claim(run_id)[0] is None and _claim(run_id)[2] is not None  # released, stamped
    sent = time.monotonic()
    weft.signal(run_id, "go", {"after": "stop"})  # now it is due
    wait(lambda: all_completed([run_id]), PICKUP, what="worker b to take the released run")
    print(f"released run completed on b {time.monotonic() - sent:.2f}s after its signal")
    assert _resumed_by(run_id) == {b.pid}
    assert duplicates([run_id]) == {}


def test_a_graceful_stop_hands_parked_runs_to_the_other_worker_within_a_pass(workers, wait):
    a, b = workers.start("a"), workers.start("b")
    runs = [f"parked-{n}" for n in range(4)]
    for run_id in runs:
        _park(wait, run_id, {a.engine_id, b.engine_id})
    stopping = next(p for p in (a, b) if Claim.objects.filter(holder_id=p.engine_id).exists())
    other = b if stopping is a else a
    mine = list(Claim.objects.filter(holder_id=stopping.engine_id).values_list("pk", flat=True))
    sent = stopping.send(signal.SIGTERM)
    assert stopping.wait(15) == 0
    wait(
        lambda: Claim.objects.filter(pk__in=mine, holder_id=other.engine_id).count() == len(mine),
        PASS_BOUND,
        interval=0.02,
        what="the other worker to hold the released parked runs",
    )
    print(f"{len(mine)} released runs held by the other worker {time.monotonic() - sent:.2f}s")
    for run_id in runs:
        weft.signal(run_id, "go", {})
    wait(lambda: all_completed(runs), 30, what="the runs to complete")
    assert duplicates(runs) == {}


def test_a_crashed_owners_run_is_taken_over_and_completes(workers, wait):
    a, b = workers.start("a"), workers.start("b")
    run_id = "takeover-1"
    owner_engine = _park(wait, run_id, {a.engine_id, b.engine_id})
    owner = workers.by_engine(owner_engine)
    other = b if owner is a else a
    _holder, epoch, _stamp = _claim(run_id)
    owner.send(signal.SIGKILL)
    owner.wait(10)
    wait(
        lambda: _claim(run_id)[0] == other.engine_id,
        TTL + 3 * RENEW + 5,
        what="the takeover",
    )
    assert _claim(run_id)[1] == epoch + 1
    weft.signal(run_id, "go", {"taken": True})
    wait(lambda: all_completed([run_id]), 30, what="the taken-over run to complete")
    signals = {engine for _s, kind, engine, _e in events_by(run_id) if kind == "signal"}
    assert signals == {other.engine_id}
