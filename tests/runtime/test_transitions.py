"""External transitions (cancel, suspend, purge, resume) from a process that owns nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import weft_django as weft
from weft_django import (
    WorkflowCancelledError,
    WorkflowClaimUnavailableError,
    WorkflowNotFoundError,
    WorkflowTerminalError,
)
from weft_django.models import Claim, Engine, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership.claims.results import Acquired
from weft_django.runtime.engine import TurnOutcome
from weft_django.testing import WorkflowDriver

from . import workflows
from .conftest import claim_of, history, steplog


def _owned_run(engine: Any, run_id: str, count: int = 4) -> None:
    weft.start("tests.steps", count, workflow_id=run_id)
    assert isinstance(engine.acquire(run_id), Acquired)


def test_cancel_mid_turn_deposes_the_owner(make_engine: Callable[..., Any]) -> None:
    engine_a = make_engine()
    _owned_run(engine_a, "c1")
    revocations = Engine.objects.get(id=engine_a.engine_id).revocations
    workflows.hook("after", "s1", lambda: weft.cancel("c1"))

    assert engine_a.drive("c1") == TurnOutcome.DEPOSED
    run = WorkflowRun.objects.get(pk="c1")
    assert run.status == RunStatus.CANCELLED
    assert run.finished_at is not None
    assert claim_of("c1") == (2, None)
    assert Engine.objects.get(id=engine_a.engine_id).revocations == revocations + 1
    assert [name for _s, _k, name, _e, _p in history("c1")] == ["s0"]  # s1 was refused
    assert engine_a.ownership.claims.held == {}
    with pytest.raises(WorkflowCancelledError):
        weft.result("c1", timeout=0)


def test_cancel_while_parked(make_engine: Callable[..., Any]) -> None:
    engine_a = make_engine()
    weft.start("tests.collect_signals", "x", 1, workflow_id="c2")
    engine_a.acquire("c2")
    assert engine_a.drive("c2") == TurnOutcome.PARKED
    weft.get_handle("c2").cancel()
    assert claim_of("c2") == (2, None)
    # The old owner's next turn sees the terminal run and drops it locally.
    assert engine_a.drive("c2") == TurnOutcome.TERMINAL
    assert engine_a.ownership.claims.held == {}
    assert WorkflowRun.objects.get(pk="c2").status == RunStatus.CANCELLED


def test_cancel_a_terminal_run_is_refused(driver: WorkflowDriver) -> None:
    weft.start("tests.echo", workflow_id="c3")
    driver.run_until_idle()
    with pytest.raises(WorkflowTerminalError) as caught:
        weft.cancel("c3")
    assert caught.value.status == RunStatus.COMPLETED
    assert WorkflowRun.objects.get(pk="c3").status == RunStatus.COMPLETED
    with pytest.raises(WorkflowNotFoundError):
        weft.cancel("nope")


def test_cancel_a_pending_run(driver: WorkflowDriver) -> None:
    weft.start("tests.echo", workflow_id="c4")
    weft.cancel("c4")
    assert driver.run_until_idle() == {}
    assert WorkflowRun.objects.get(pk="c4").status == RunStatus.CANCELLED
    assert claim_of("c4") == (1, None)


def test_suspend_mid_turn_then_resume_completes(
    make_engine: Callable[..., Any], driver: WorkflowDriver
) -> None:
    engine_a = make_engine()
    _owned_run(engine_a, "su1")
    workflows.hook("after", "s2", lambda: weft.suspend("su1"))

    assert engine_a.drive("su1") == TurnOutcome.DEPOSED
    assert WorkflowRun.objects.get(pk="su1").status == RunStatus.SUSPENDED
    assert claim_of("su1") == (2, None)
    assert [name for _s, _k, name, _e, _p in history("su1")] == ["s0", "s1"]

    # A suspended run is not picked up by anyone.
    assert driver.run_until_idle() == {}

    weft.resume("su1")
    assert WorkflowRun.objects.get(pk="su1").status == RunStatus.WAITING
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("su1", timeout=0) == ["s0", "s1", "s2", "s3"]
    # Resume rotated the epoch once more; the driver's fresh claim is the next one.
    assert [(name, epoch) for _s, _k, name, _e, epoch in history("su1")] == [
        ("s0", 1),
        ("s1", 1),
        ("s2", 4),
        ("s3", 4),
    ]
    assert steplog("su1") == ["s0", "s1", "s2", "s2", "s3"]


def test_resume_a_run_suspended_before_it_started(driver: WorkflowDriver) -> None:
    weft.start("tests.echo", "x", workflow_id="su2")
    weft.suspend("su2")
    assert driver.run_until_idle() == {}
    weft.resume("su2")
    assert WorkflowRun.objects.get(pk="su2").status == RunStatus.PENDING
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("su2", timeout=0) == {"args": ["x"], "kwargs": {}}


def test_resume_refusals(make_engine: Callable[..., Any], driver: WorkflowDriver) -> None:
    weft.start("tests.collect_signals", "x", 1, workflow_id="su3")
    driver.run_until_idle()
    with pytest.raises(weft.WorkflowNotSuspendedError, match="is waiting, not suspended") as caught:
        weft.resume("su3")  # not suspended
    assert caught.value.status == RunStatus.WAITING
    weft.suspend("su3")
    with pytest.raises(WorkflowTerminalError):
        weft.suspend("su3")

    # A live engine claims the suspended run: resume loses to it.
    engine_b = make_engine()
    assert isinstance(engine_b.acquire("su3"), Acquired)
    with pytest.raises(WorkflowClaimUnavailableError) as unavailable:
        weft.resume("su3")
    assert unavailable.value.workflow_id == "su3"
    assert unavailable.value.held_by == engine_b.engine_id
    assert WorkflowRun.objects.get(pk="su3").status == RunStatus.SUSPENDED


def test_purge_mid_turn_deposes_the_owner_and_the_epoch_survives(
    make_engine: Callable[..., Any], driver: WorkflowDriver
) -> None:
    engine_a = make_engine()
    _owned_run(engine_a, "pg1")
    workflows.hook("after", "s1", lambda: weft.purge("pg1"))

    assert engine_a.drive("pg1") == TurnOutcome.DEPOSED
    assert not WorkflowRun.objects.filter(pk="pg1").exists()
    assert not WorkflowEvent.objects.filter(run_id="pg1").exists()
    assert claim_of("pg1") == (2, None)  # the claim row outlives the run
    assert engine_a.ownership.claims.held == {}
    with pytest.raises(WorkflowNotFoundError):
        weft.get_handle("pg1")

    # The id is reused: the first claim of the new run is old+1, never 1.
    weft.start("tests.steps", 2, workflow_id="pg1")
    assert weft.describe("pg1").epoch == 2
    assert driver.run_until_idle() == {"completed": 1}
    assert {epoch for *_rest, epoch in history("pg1")} == {3}
    assert weft.describe("pg1").epoch == 3
    assert claim_of("pg1") == (3, None)


def test_purge_of_a_terminal_run_and_of_a_missing_one(driver: WorkflowDriver) -> None:
    weft.start("tests.echo", workflow_id="pg2")
    driver.run_until_idle()
    weft.get_handle("pg2").purge()
    assert not WorkflowRun.objects.filter(pk="pg2").exists()
    assert Claim.objects.get(workflow_id="pg2").epoch == 2
    with pytest.raises(WorkflowNotFoundError):
        weft.purge("pg2")
