"""What ``weft.result()`` raises says what is true of the run: a timed-out run
timed out (it did not fail), and a run with no stored error does not print an
empty one."""

from __future__ import annotations

import pytest

import weft_django as weft
from weft_django import WorkflowFailedError
from weft_django.models import RunStatus, WorkflowRun
from weft_django.runtime.runs import transition
from weft_django.testing import WorkflowDriver


def test_a_run_past_its_execution_timeout_timed_out(driver: WorkflowDriver) -> None:
    weft.start("tests.with_timeout", workflow_id="rm1")
    driver.run_until_idle()
    driver.advance(61)  # the owner commits timed_out, with the error it stores
    with pytest.raises(WorkflowFailedError) as caught:
        weft.result("rm1", timeout=0)
    assert caught.value.status == RunStatus.TIMED_OUT
    assert caught.value.error["type"] == "TimedOut"
    assert str(caught.value) == "Workflow run 'rm1' timed out: its execution timeout passed."


def test_a_timeout_committed_by_another_process_says_the_same(driver: WorkflowDriver) -> None:
    """The store-wide pass commits timed_out with no error stored."""
    weft.start("tests.with_timeout", workflow_id="rm2")
    driver.run_until_idle()
    transition("rm2", RunStatus.TIMED_OUT)
    assert WorkflowRun.objects.get(pk="rm2").error is None
    with pytest.raises(WorkflowFailedError) as caught:
        weft.result("rm2", timeout=0)
    assert str(caught.value) == "Workflow run 'rm2' timed out: its execution timeout passed."


def test_a_failed_run_names_its_error(driver: WorkflowDriver) -> None:
    weft.start("tests.fails", workflow_id="rm3")
    driver.run_until_idle()
    with pytest.raises(WorkflowFailedError) as caught:
        weft.result("rm3", timeout=0)
    assert caught.value.status == RunStatus.FAILED
    assert str(caught.value).startswith("Workflow run 'rm3' failed: KeyError: ")


def test_a_failed_run_with_no_stored_error_prints_none(driver: WorkflowDriver) -> None:
    weft.start("tests.echo", workflow_id="rm4")
    WorkflowRun.objects.filter(pk="rm4").update(status=RunStatus.FAILED)
    with pytest.raises(WorkflowFailedError) as caught:
        weft.result("rm4", timeout=0)
    assert caught.value.error == {"type": "failed"}  # the status stands in, as before
    assert str(caught.value) == "Workflow run 'rm4' failed."


def test_a_child_that_timed_out_is_reported_so_to_its_parent(driver: WorkflowDriver) -> None:
    weft.start("tests.parent", "tests.with_timeout", workflow_id="rm5")
    driver.run_until_idle()
    driver.advance(61)  # the child times out; the parent catches WorkflowFailedError
    assert weft.result("rm5", timeout=0) == {
        "child": "rm5/child-0",
        "failed": "TimedOut",
        "msg": "execution timeout reached",
    }
