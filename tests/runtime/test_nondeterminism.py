"""A history the code no longer matches suspends the run with NonDeterminismError."""

from __future__ import annotations

import logging

import pytest

import weft_django as weft
from weft_django.models import RunStatus, WorkflowEvent, WorkflowRun
from weft_django.testing import WorkflowDriver

from .conftest import claim_of, kinds, steplog
from .workflows import LOG, STATE


def test_changed_step_name_suspends_the_run(
    driver: WorkflowDriver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="weft_django.engine")
    weft.start("tests.nondeterministic", workflow_id="nd1")
    assert driver.run_until_idle() == {"parked": 1}
    assert kinds("nd1") == [("step", "first-a"), ("wait", "signal:go")]

    STATE["variant"] = "b"  # a deploy changed the code under the parked run
    weft.signal("nd1", "go")
    assert driver.run_until_idle() == {"suspended": 1}

    run = WorkflowRun.objects.get(pk="nd1")
    assert run.status == RunStatus.SUSPENDED
    assert run.error["type"] == "NonDeterminismError"
    assert "operation #0" in run.error["message"]
    assert "step('first-a')" in run.error["message"]
    assert "step('first-b')" in run.error["message"]
    assert claim_of("nd1") == (1, None)  # released with the suspend commit
    # One WARNING line says which run, of which workflow, and why.
    [line] = [r for r in caplog.records if "suspended" in r.getMessage()]
    assert line.levelno == logging.WARNING
    assert line.getMessage().startswith(
        "run nd1 (tests.nondeterministic) suspended: NonDeterminismError: "
    )
    # Nothing was written past the mismatch; the signal is still buffered.
    assert kinds("nd1") == [("step", "first-a"), ("wait", "signal:go")]
    assert weft.describe("nd1").pending_signals == 1
    assert steplog("nd1") == ["first"]

    # Deploying code that replays the history, then resuming, completes the run.
    STATE["variant"] = "a"
    weft.resume("nd1")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("nd1", timeout=0) == "a"
    assert steplog("nd1") == ["first", "last"]


def test_except_exception_cannot_hide_a_mismatch(driver: WorkflowDriver) -> None:
    weft.start("tests.nondeterministic_hidden", workflow_id="nd2")
    assert driver.run_until_idle() == {"parked": 1}
    assert LOG == []

    STATE["variant"] = "b"
    weft.signal("nd2", "go")
    assert driver.run_until_idle() == {"suspended": 1}
    # The workflow caught the mismatch (and the follow-up) and returned normally...
    assert LOG == [("caught", "NonDeterminismError"), ("caught", "NonDeterminismError")]
    # ...yet the run is suspended, not completed with "hidden".
    run = WorkflowRun.objects.get(pk="nd2")
    assert run.status == RunStatus.SUSPENDED
    assert run.result is None
    assert run.error["type"] == "NonDeterminismError"
    assert WorkflowEvent.objects.filter(run_id="nd2").count() == 2


def test_history_with_a_gap_is_refused(driver: WorkflowDriver) -> None:
    weft.start("tests.steps_around_signal", workflow_id="nd3")
    driver.run_until_idle()
    WorkflowEvent.objects.filter(run_id="nd3", seq=1).delete()
    weft.signal("nd3", "go")
    assert driver.run_until_idle() == {"suspended": 1}
    run = WorkflowRun.objects.get(pk="nd3")
    assert run.error["type"] == "NonDeterminismError"
    assert "gap" in run.error["message"]


def test_extra_operation_where_history_has_a_wait(driver: WorkflowDriver) -> None:
    weft.start("tests.collect_signals", "x", 1, workflow_id="nd4")
    driver.run_until_idle()
    # Rewrite the stored arguments: the code now waits on another signal name.
    WorkflowRun.objects.filter(pk="nd4").update(args=["y", 1])
    weft.signal("nd4", "y")
    assert driver.run_until_idle() == {"suspended": 1}
    error = WorkflowRun.objects.get(pk="nd4").error
    assert error["type"] == "NonDeterminismError"
    assert "wait('signal:x')" in error["message"]


@pytest.mark.parametrize("variant", ["return", "raise"])
def test_ending_before_the_recorded_history_does(driver: WorkflowDriver, variant: str) -> None:
    weft.start("tests.ends_early", workflow_id="nd5")
    assert driver.run_until_idle() == {"parked": 1}
    assert kinds("nd5") == [("step", "s0"), ("wait", "signal:go")]

    STATE["variant"] = variant  # the new code ends where the old one waited
    weft.signal("nd5", "go")
    assert driver.run_until_idle() == {"suspended": 1}
    run = WorkflowRun.objects.get(pk="nd5")
    assert run.status == RunStatus.SUSPENDED
    assert run.result is None
    assert run.error["type"] == "NonDeterminismError"
    assert "operation #1" in run.error["message"]
    assert "wait('signal:go')" in run.error["message"]
    ending = "returns" if variant == "return" else "raises LookupError"
    assert f"no more operations (the workflow now {ending})" in run.error["message"]
    assert kinds("nd5") == [("step", "s0"), ("wait", "signal:go")]

    STATE["variant"] = "a"
    weft.resume("nd5")
    driver.run_until_idle()
    assert weft.result("nd5", timeout=0) == "waited"
