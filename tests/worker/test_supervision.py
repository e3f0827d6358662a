"""Supervised worker threads, and a worker that cannot renew its lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError

import weft_django as weft
from weft_django.models import Engine, RunStatus, WorkflowRun
from weft_django.ownership.modes import WorkflowLeaseOwnership
from weft_django.ownership.passes.outcomes import PassResult
from weft_django.worker import Worker
from weft_django.worker.supervision import Health, RenewalWatch, Supervisor

from ..workers import Passes, Running, wait_for


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_renewal_watch_turns_suspect_past_the_ttl_and_gives_up_on_failures() -> None:
    clock = Ticks()
    watch = RenewalWatch(ttl=30, exit_after=60, clock=clock)
    assert watch.health() is Health.HEALTHY
    clock.now += 30
    assert watch.health() is Health.HEALTHY  # at the TTL exactly: still fine
    clock.now += 0.1
    assert watch.health() is Health.SUSPECT
    watch.renewed()
    assert watch.health() is Health.HEALTHY and watch.silence() == 0
    watch.failed()
    clock.now += 31
    watch.failed()  # the failing streak counts from its first failure
    assert watch.health() is Health.SUSPECT and watch.failing_for() == 31
    clock.now += 29.1
    assert watch.health() is Health.GIVE_UP


def test_a_worker_frozen_past_the_limit_does_not_give_up_when_it_wakes() -> None:
    """Frozen (SIGSTOP, a GC pause) longer than ``exit_after``: suspect until its next
    renewal, which it can make at once, but never a give-up: nothing failed."""
    clock = Ticks()
    watch = RenewalWatch(ttl=3, exit_after=6, clock=clock)
    clock.now += 10  # frozen
    assert watch.health() is Health.SUSPECT
    watch.renewed()
    assert watch.health() is Health.HEALTHY


def test_a_supervised_thread_that_dies_is_restarted_with_backoff(
    metric: Callable[..., Any],
) -> None:
    stop = threading.Event()
    calls: list[float] = []
    done = threading.Event()

    def flaky() -> None:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise RuntimeError("boom")
        done.set()

    before = metric("weft_worker_thread_restarts_total", thread="flaky")
    supervisor = Supervisor(stop, first_delay=0.05)
    supervisor.spawn("flaky", flaky)
    assert done.wait(5)
    supervisor.join(5)
    assert len(calls) == 3  # returned normally the third time: not restarted again
    assert calls[2] - calls[1] >= calls[1] - calls[0] >= 0.05  # exponential backoff
    assert metric("weft_worker_thread_restarts_total", thread="flaky") - before == 2


def test_a_stop_during_the_backoff_ends_the_thread() -> None:
    stop = threading.Event()
    supervisor = Supervisor(stop, first_delay=30)
    thread = supervisor.spawn("doomed", lambda: (_ for _ in ()).throw(RuntimeError("x")))
    time.sleep(0.1)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


pytestmark_db = pytest.mark.django_db(transaction=True)


@pytestmark_db
def test_the_renewal_thread_is_restarted_after_an_unexpected_error(
    start_worker: Callable[..., Running], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread dies outside the pass's own error handling; renewals go on."""
    real = Worker._publish
    died = threading.Event()

    def publish_once_broken(self: Worker, result: PassResult) -> None:
        if result.name == "renew" and not died.is_set():
            died.set()
            raise RuntimeError("simulated: a bug outside the pass's error handling")
        real(self, result)

    monkeypatch.setattr(Worker, "_publish", publish_once_broken)
    passes = Passes()
    running = start_worker(on_pass=passes)
    assert died.wait(5)
    wait_for(lambda: len(passes.named("renew")) >= 3, 10, "renewals after the restart")
    engine = Engine.objects.get(id=running.worker.engine.engine_id)
    assert running.worker.watch.health() is Health.HEALTHY
    assert engine.heartbeat_at is not None
    running.stop()


@pytestmark_db
def test_a_worker_that_cannot_renew_stops_claiming_then_exits_non_zero(
    start_worker: Callable[..., Running], monkeypatch: pytest.MonkeyPatch
) -> None:
    def renew_fails(self: WorkflowLeaseOwnership) -> PassResult:
        raise OperationalError("simulated: the engine row cannot be renewed")

    monkeypatch.setattr(WorkflowLeaseOwnership, "renew", renew_fails)
    began = time.monotonic()
    running = start_worker(exit_after=2.5)
    # Past the TTL (1 s) without a renewal, nothing new is claimed.
    wait_for(lambda: running.worker.watch.health() is not Health.HEALTHY, 5, "suspicion")
    run_id = weft.start("tw.steps", 1).id
    time.sleep(0.5)
    assert WorkflowRun.objects.get(pk=run_id).status == RunStatus.PENDING
    running.join(10)
    assert running.returned == 1
    assert 2.5 <= time.monotonic() - began < 8
    assert WorkflowRun.objects.get(pk=run_id).status == RunStatus.PENDING
