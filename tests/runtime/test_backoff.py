"""Turns that fail on the database back off, and a run the database keeps refusing is
suspended with the error stored instead of repeating its step's side effect forever."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from django.db import OperationalError

import weft_django as weft
from weft_django.models import RunStatus, WorkflowRun
from weft_django.ownership.modes import WorkflowLeaseOwnership
from weft_django.runtime.backoff import RunBackoff, is_retryable_conflict, is_transient
from weft_django.runtime.engine import TurnOutcome, WorkflowEngine

from ..faults import refused_checkpoints
from ..workers import wait_for

SIDE_EFFECTS: list[str] = []


def side_effect(run_id: str) -> str:
    SIDE_EFFECTS.append(run_id)
    return "done"


@weft.workflow(name="tests.backoff.one_step")
def one_step(ctx: weft.Context) -> str:
    return ctx.step(side_effect, ctx.workflow_id)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- the policy ---------------------------------------------------------------------


def test_delays_grow_exponentially_with_jitter_up_to_the_cap() -> None:
    low = RunBackoff(base=0.5, cap=60, jitter=lambda: 0.0)
    high = RunBackoff(base=0.5, cap=60, jitter=lambda: 0.999999)
    assert [low.delay_for(n) for n in (1, 2, 3, 4)] == [0.25, 0.5, 1.0, 2.0]
    assert [round(high.delay_for(n), 3) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert low.delay_for(20) == 30.0 and round(high.delay_for(20)) == 60


def test_a_run_is_ready_again_once_its_backoff_has_passed() -> None:
    clock = Clock()
    backoff = RunBackoff(base=1.0, jitter=lambda: 1.0, clock=clock)
    assert backoff.ready("r")
    assert backoff.failed("r") == 1
    assert not backoff.ready("r") and backoff.ready("other")
    clock.now = 1.0
    assert backoff.ready("r")
    assert backoff.failed("r") == 2
    backoff.succeeded("r")
    assert backoff.ready("r") and backoff.count("r") == 0


def test_only_refusals_exhaust_the_retries_never_connection_or_lock_failures() -> None:
    backoff = RunBackoff(limit=3)
    refusal = Exception("refused")
    outage = OperationalError("server closed the connection unexpectedly")
    assert not backoff.exhausted(2, refusal)
    assert backoff.exhausted(3, refusal)
    assert is_transient(outage) and not backoff.exhausted(50, outage)


def test_on_mysql_the_error_number_tells_a_refusal_from_an_outage() -> None:
    """MySQLdb raises nearly every server error as OperationalError: the number decides."""
    mysqldb = pytest.importorskip("MySQLdb", reason="the mysqlclient driver is not installed")

    def wrapped(code: int, message: str) -> OperationalError:
        error = OperationalError(code, message)
        error.__cause__ = mysqldb.OperationalError(code, message)
        return error

    assert not is_transient(wrapped(1644, "refused by a trigger"))  # SIGNAL in a trigger
    assert not is_transient(wrapped(1146, "Table 'x' doesn't exist"))
    for code in (1205, 1213, 1927, 2006, 2013, 4031):
        assert is_transient(wrapped(code, "lost")), code


def test_only_deadlocks_and_serialization_failures_are_retryable_conflicts() -> None:
    class PgError(Exception):
        def __init__(self, sqlstate: str) -> None:
            super().__init__(sqlstate)
            self.sqlstate = sqlstate

    def pg(state: str) -> OperationalError:
        error = OperationalError(state)
        error.__cause__ = PgError(state)
        return error

    assert is_retryable_conflict(pg("40P01")) and is_retryable_conflict(pg("40001"))
    assert not is_retryable_conflict(pg("55P03"))  # lock not available: busy, not a conflict
    assert not is_retryable_conflict(pg("23505"))
    assert not is_retryable_conflict(OperationalError("server closed the connection"))
    mysqldb = pytest.importorskip("MySQLdb", reason="the mysqlclient driver is not installed")
    deadlock = OperationalError(1213, "Deadlock found")
    deadlock.__cause__ = mysqldb.OperationalError(1213, "Deadlock found")
    timeout = OperationalError(1205, "Lock wait timeout")
    timeout.__cause__ = mysqldb.OperationalError(1205, "Lock wait timeout")
    assert is_retryable_conflict(deadlock) and not is_retryable_conflict(timeout)


# -- on an engine -------------------------------------------------------------------


@pytest.fixture
def refusing_database(db: None) -> Iterator[Callable[[], None]]:
    """A trigger makes the database refuse every event of run ``refused``."""
    with ExitStack() as stack:
        stack.enter_context(refused_checkpoints("refused", "refused by a trigger"))
        yield stack.close


@pytest.mark.django_db(transaction=True)  # autocommit, as a worker runs
def test_a_refused_checkpoint_suspends_the_run_after_the_limit(
    make_engine: Callable[..., WorkflowEngine],
    refusing_database: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.engine")
    SIDE_EFFECTS.clear()
    engine = make_engine()
    engine.backoff = RunBackoff(base=0.0, limit=5)
    weft.start("tests.backoff.one_step", workflow_id="refused")
    engine.acquire("refused")
    outcomes = [engine.drive("refused") for _ in range(5)]
    assert outcomes == [TurnOutcome.ABANDONED] * 4 + [TurnOutcome.SUSPENDED]
    assert SIDE_EFFECTS == ["refused"] * 5  # at most the limit
    run = WorkflowRun.objects.get(pk="refused")
    assert run.status == RunStatus.SUSPENDED
    assert "suspended after 5 consecutive turns refused by the database" in run.error["message"]
    assert "refused by a trigger" in run.error["message"]
    assert engine.ownership.fence_epoch("refused") is None  # the claim was released
    assert "run refused suspended after 5 consecutive turns refused by" in caplog.text

    refusing_database()  # the cause is fixed: resume it
    weft.resume("refused")
    engine.acquire("refused")
    assert engine.drive("refused") is TurnOutcome.COMPLETED
    assert weft.result("refused", timeout=0) == "done"
    assert len(SIDE_EFFECTS) == 6


@pytest.mark.django_db(transaction=True)
def test_connection_failures_back_off_but_never_suspend(
    make_engine: Callable[..., WorkflowEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    SIDE_EFFECTS.clear()
    engine = make_engine()
    engine.backoff = RunBackoff(base=0.0, limit=2)
    weft.start("tests.backoff.one_step", workflow_id="outage")
    engine.acquire("outage")

    def connection_lost(self: Any, *args: Any, **kwargs: Any) -> bool:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(WorkflowLeaseOwnership, "insert_fenced", connection_lost)
    monkeypatch.setattr(WorkflowLeaseOwnership, "fenced", connection_lost)
    assert [engine.drive("outage") for _ in range(6)] == [TurnOutcome.ABANDONED] * 6
    assert engine.backoff.count("outage") == 6
    monkeypatch.undo()
    assert engine.drive("outage") is TurnOutcome.COMPLETED
    assert engine.backoff.count("outage") == 0


@pytest.mark.django_db(transaction=True)
def test_a_worker_does_not_spin_on_a_refused_run(
    start_worker: Callable[..., Any], refusing_database: Callable[[], None]
) -> None:
    """The failure that ran a step's side effect 1,661 times in 5 seconds: now it runs
    at most the limit, spread over the backoff, then the run is suspended."""
    SIDE_EFFECTS.clear()
    running = start_worker()
    running.worker.engine.backoff = RunBackoff(base=0.05, limit=5)
    weft.start("tests.backoff.one_step", workflow_id="refused")
    wait_for(
        lambda: WorkflowRun.objects.get(pk="refused").status == RunStatus.SUSPENDED,
        15,
        "the refused run to be suspended",
    )
    assert SIDE_EFFECTS == ["refused"] * 5
    running.stop()
