"""Durable timers, delayed starts and the execution timeout."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import weft_django as weft
from weft_django import WorkflowFailedError
from weft_django.models import RunStatus, WorkflowRun
from weft_django.ownership.clock import db_now
from weft_django.runtime.engine import TurnOutcome
from weft_django.runtime.runs import expire_timed_out
from weft_django.testing import WorkflowDriver

from .conftest import claim_of, kinds, steplog


def test_sleep_parks_until_the_timer_is_due(driver: WorkflowDriver) -> None:
    weft.start("tests.sleeper", 300, workflow_id="tm1")
    assert driver.run_until_idle() == {"parked": 1}
    run = WorkflowRun.objects.get(pk="tm1")
    assert run.status == RunStatus.WAITING
    assert run.waiting_on["kind"] == "sleep"
    assert run.wake_at is not None
    assert run.waiting_on["until"] == run.wake_at.isoformat()
    assert steplog("tm1") == ["before"]

    driver.advance(299)
    assert WorkflowRun.objects.get(pk="tm1").status == RunStatus.WAITING
    assert steplog("tm1") == ["before"]

    driver.advance(2)
    assert weft.result("tm1", timeout=0) == ["before", "after"]
    assert steplog("tm1") == ["before", "after"]
    assert kinds("tm1") == [("step", "before"), ("sleep", ""), ("step", "after")]


def test_sleep_accepts_timedelta_and_zero(driver: WorkflowDriver) -> None:
    weft.start("tests.sleeper", 0, workflow_id="tm2")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("tm2", timeout=0) == ["before", "after"]


def test_start_at_delays_the_first_turn(driver: WorkflowDriver) -> None:
    later = db_now() + timedelta(hours=1)
    weft.start("tests.echo", 1, workflow_id="tm3", start_at=later)
    assert driver.run_until_idle() == {}
    assert WorkflowRun.objects.get(pk="tm3").status == RunStatus.PENDING
    driver.advance(timedelta(minutes=59))
    assert WorkflowRun.objects.get(pk="tm3").status == RunStatus.PENDING
    driver.advance(timedelta(minutes=2))
    assert weft.result("tm3", timeout=0) == {"args": [1], "kwargs": {}}


def test_execution_timeout_times_the_run_out(driver: WorkflowDriver) -> None:
    weft.start("tests.with_timeout", workflow_id="tm4")
    run = WorkflowRun.objects.get(pk="tm4")
    assert run.timeout_at is not None
    assert timedelta(seconds=59) < run.timeout_at - run.created_at <= timedelta(seconds=60)

    assert driver.run_until_idle() == {"parked": 1}
    # It waits for a signal with no deadline: the wake-up is the execution timeout.
    assert WorkflowRun.objects.get(pk="tm4").wake_at == run.timeout_at
    driver.advance(30)
    assert WorkflowRun.objects.get(pk="tm4").status == RunStatus.WAITING

    driver.advance(31)
    run.refresh_from_db()
    assert run.status == RunStatus.TIMED_OUT
    assert run.finished_at is not None
    assert run.error["type"] == "TimedOut"
    with pytest.raises(WorkflowFailedError):
        weft.result("tm4", timeout=0)
    assert claim_of("tm4") == (1, None)
    assert steplog("tm4") == ["s0"]


def test_execution_timeout_committed_by_a_non_owner_rotates_the_epoch(
    make_engine: Callable[..., Any],
) -> None:
    engine_a = make_engine()
    weft.start("tests.with_timeout", workflow_id="tm5")
    engine_a.acquire("tm5")
    assert engine_a.drive("tm5") == TurnOutcome.PARKED
    assert claim_of("tm5") == (1, engine_a.engine_id)

    WorkflowRun.objects.filter(pk="tm5").update(timeout_at=db_now() - timedelta(seconds=1))
    assert expire_timed_out() == ["tm5"]
    assert WorkflowRun.objects.get(pk="tm5").status == RunStatus.TIMED_OUT
    assert claim_of("tm5") == (2, None)
    assert engine_a.drive("tm5") == TurnOutcome.TERMINAL
    assert engine_a.ownership.claims.held == {}
    assert expire_timed_out() == []


def test_an_unrelated_wake_does_not_end_a_sleep_early(driver: WorkflowDriver) -> None:
    weft.start("tests.sleeper", 600, workflow_id="tm6")
    driver.run_until_idle()
    wake_at = WorkflowRun.objects.get(pk="tm6").wake_at
    weft.signal("tm6", "unrelated", 1)
    assert driver.run_until_idle() == {"parked": 1}  # woken, replayed, parked again
    run = WorkflowRun.objects.get(pk="tm6")
    assert (run.status, run.wake_at, run.wake_hint_at) == (RunStatus.WAITING, wake_at, None)
    assert kinds("tm6") == [("step", "before"), ("sleep", "")]
    assert steplog("tm6") == ["before"]
    driver.advance(601)
    assert weft.result("tm6", timeout=0) == ["before", "after"]
