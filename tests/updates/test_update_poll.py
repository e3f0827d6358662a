"""Pass 4, the owner-side update poll: in isolation with fake targets, then on an engine."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

import weft_django as weft
from weft_django import WeftWorkflowWakeDiscardedWarning
from weft_django.models import Engine, UpdateStatus
from weft_django.ownership.clock import db_now
from weft_django.ownership.metrics import observe_pass
from weft_django.ownership.passes.outcomes import Outcome, PassResult
from weft_django.ownership.passes.update_poll import update_poll_pass
from weft_django.worker import Worker

from .conftest import answer, expire_lease, send, statuses

T0 = datetime(2030, 1, 1, tzinfo=UTC)
DRAINED, NO_PENDING, DRAIN_FAILED = (
    Outcome.DRAINED,
    Outcome.NO_PENDING_UPDATES,
    Outcome.DRAIN_FAILED,
)


class StepClock:
    """Each call returns the next second after T0."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> datetime:
        self.calls += 1
        return T0 + timedelta(seconds=self.calls - 1)


class FakeTarget:
    def __init__(
        self,
        held: list[str],
        pending: set[str],
        *,
        failing_drains: set[str] = frozenset(),  # type: ignore[assignment]
        failing_probe: bool = False,
    ) -> None:
        self.held = held
        self.pending = pending
        self.failing_drains = failing_drains
        self.failing_probe = failing_probe
        self.probes = 0
        self.drained: list[str] = []

    def held_count(self) -> int:
        return len(self.held)

    def held_with_pending_updates(self) -> list[str]:
        self.probes += 1
        if self.failing_probe:
            raise ConnectionError("probe lost its connection")
        return sorted(run_id for run_id in self.held if run_id in self.pending)

    def drain_updates(self, run_id: str) -> None:
        self.drained.append(run_id)
        if run_id in self.failing_drains:
            raise RuntimeError(f"drain of {run_id} broke")


def outcomes(result: PassResult) -> list[tuple[str, str]]:
    return list(result.outcomes.items())


def test_only_pending_runs_are_drained_and_listed_the_rest_counted() -> None:
    target = FakeTarget(["c", "a", "d", "b"], pending={"a", "b"})
    result = update_poll_pass(target, clock=StepClock())
    assert outcomes(result) == [("a", DRAINED), ("b", DRAINED)]
    assert target.drained == ["a", "b"]
    assert target.probes == 1
    assert result.counts == {DRAINED: 2, NO_PENDING: 2}
    assert result.succeeded


def test_a_failing_drain_does_not_stop_later_runs() -> None:
    target = FakeTarget(["r1", "r2", "r3", "r4"], pending={"r1", "r2", "r3"}, failing_drains={"r2"})
    result = update_poll_pass(target, clock=StepClock())
    assert outcomes(result) == [("r1", DRAINED), ("r2", DRAIN_FAILED), ("r3", DRAINED)]
    assert target.drained == ["r1", "r2", "r3"]
    assert result.counts == {DRAINED: 2, DRAIN_FAILED: 1, NO_PENDING: 1}
    assert result.errors == {"r2": "RuntimeError: drain of r2 broke"}


def test_the_start_time_comes_from_the_injected_clock() -> None:
    clock = StepClock()
    result = update_poll_pass(FakeTarget(["x"], pending={"x"}), clock=clock)
    assert result.name == "update_poll"
    assert result.started_at == T0
    assert result.finished_at is not None and result.finished_at >= T0
    assert clock.calls == 1  # the end is the start plus the pass's monotonic time
    assert result.outcomes == {"x": DRAINED}


def test_a_failing_probe_fails_the_pass_and_drains_nothing() -> None:
    target = FakeTarget(["r0", "r1"], pending={"r0"}, failing_probe=True)
    result = update_poll_pass(target, clock=StepClock())
    assert not result.succeeded
    assert target.drained == [] and result.outcomes == {}
    assert result.errors == {"*": "ConnectionError: probe lost its connection"}
    assert result.finished_at is not None
    # The next pass probes again.
    target.failing_probe = False
    assert update_poll_pass(target, clock=StepClock()).outcomes == {"r0": DRAINED}


def test_no_held_runs_is_an_empty_pass() -> None:
    target = FakeTarget([], pending=set())
    result = update_poll_pass(target, clock=StepClock())
    assert result.outcomes == {} and result.counts == {}
    assert result.finished_at is not None


def test_outcomes_are_counted_in_metrics(metric: Callable[..., float]) -> None:
    def value(outcome: str) -> float:
        return metric("weft_pass_outcomes_total", pass_name="update_poll", outcome=outcome)

    before = {o: value(o) for o in (DRAINED, NO_PENDING, DRAIN_FAILED)}
    observe_pass(
        update_poll_pass(
            FakeTarget(["a", "b", "c"], pending={"a", "b"}, failing_drains={"b"}), clock=StepClock()
        )
    )
    assert {o: value(o) - before[o] for o in before} == {
        DRAINED: 1,
        NO_PENDING: 1,
        DRAIN_FAILED: 1,
    }


# -- on a real engine, through the worker's target ------------------------------------


def _worker(engine: Any) -> Worker:
    return Worker(engine=engine, install_signal_handlers=False)


def _update_pass(worker: Worker) -> None:
    """One update poll pass, then the turns it scheduled, run here, in order."""
    worker._publish(worker.passes.update_poll())
    worker.pool.run_pending()


def test_the_worker_pass_drains_held_runs_with_pending_updates(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    for run in ("p1", "p2", "p3"):
        weft.start("tests.updates.counter", workflow_id=run)
        engine.acquire(run)
        engine.drive(run)
    first, second = send("p2", "add", 1), send("p2", "add", 2)
    worker = _worker(engine)
    _update_pass(worker)
    result = worker.last_passes["update_poll"]
    assert result.outcomes == {"p2": DRAINED}
    assert result.counts == {DRAINED: 1, NO_PENDING: 2}
    assert [answer("p2", first)["total"], answer("p2", second)["total"]] == [1, 3]

    _update_pass(worker)  # nothing left
    assert worker.last_passes["update_poll"].counts == {NO_PENDING: 3}


def test_the_worker_pass_leaves_a_run_taken_over_to_its_new_owner(
    make_engine: Callable[..., Any],
) -> None:
    engine_a, engine_b = make_engine(), make_engine()
    for run in ("p4", "p5"):
        weft.start("tests.updates.counter", workflow_id=run)
        engine_a.acquire(run)
        engine_a.drive(run)
    lost = send("p4", "add", 1)
    kept = send("p5", "add", 2)
    expire_lease(engine_a)
    engine_b.acquire("p4")  # A does not know yet; its lease is live again below
    Engine.objects.filter(id=engine_a.engine_id).update(
        lease_expires_at=db_now() + timedelta(minutes=5)
    )
    worker = _worker(engine_a)
    if connection.features.supports_partial_indexes:
        _update_pass(worker)  # the probe reads the claims: B holds p4 now
        assert worker.last_passes["update_poll"].outcomes == {"p5": DRAINED}
    else:  # MySQL/MariaDB probe the runs A believes it holds; the wake check turns p4 away
        with pytest.warns(WeftWorkflowWakeDiscardedWarning):
            _update_pass(worker)
        result = worker.last_passes["update_poll"]
        assert result.outcomes == {"p4": DRAIN_FAILED, "p5": DRAINED}
        assert "no longer held" in result.errors["p4"]
    assert statuses("p4") == {lost: UpdateStatus.PENDING}
    assert answer("p5", kept)["total"] == 2


def test_the_worker_pass_only_schedules_turns_and_never_after_stop(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.updates.counter", workflow_id="p6")
    engine.acquire("p6")
    engine.drive("p6")
    request = send("p6", "add", 5)
    worker = _worker(engine)
    worker._publish(worker.passes.update_poll())  # schedules, applies nothing itself
    assert worker.last_passes["update_poll"].outcomes == {"p6": DRAINED}
    assert statuses("p6") == {request: UpdateStatus.PENDING}
    worker.stop()
    worker._publish(worker.passes.update_poll())
    result = worker.last_passes["update_poll"]
    assert result.outcomes == {"p6": DRAIN_FAILED}
    assert "stopping" in result.errors["p6"]
