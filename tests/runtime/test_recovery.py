"""weft.retry, weft.fork and weft.cancel(children=True), driven in-process."""

from __future__ import annotations

import pytest

import weft_django as weft
from weft_django.models import RunStatus, WorkflowEvent, WorkflowRun
from weft_django.testing import WorkflowDriver

from .conftest import kinds, steplog
from .workflows import CALLS, STATE


def _failed_recoverable(driver: WorkflowDriver, run_id: str = "r1") -> None:
    weft.start("tests.recoverable", workflow_id=run_id)
    driver.run_until_idle()
    weft.signal(run_id, "go", {"n": 1})
    driver.run_until_idle()
    assert WorkflowRun.objects.get(pk=run_id).status == RunStatus.FAILED


def test_retry_starts_a_linked_run_of_the_same_workflow_version_and_arguments(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.echo", 1, x=2, workflow_id="e1")
    weft.cancel("e1", reason="oops")
    handle = weft.retry("e1", new_id="e1-again", reason="try again", by="alice")
    assert isinstance(handle, weft.WorkflowHandle)
    assert handle.id == "e1-again"
    new = WorkflowRun.objects.get(pk="e1-again")
    old = WorkflowRun.objects.get(pk="e1")
    assert (new.workflow_name, new.workflow_version, new.args, new.kwargs) == (
        old.workflow_name,
        old.workflow_version,
        old.args,
        old.kwargs,
    )
    assert (new.origin_id, new.origin_step, new.parent_id) == ("e1", None, "")
    driver.run_until_idle()
    assert handle.result(timeout=0) == weft.result("e1-again", timeout=0)
    assert handle.result(timeout=0) is not None


def test_retry_runs_every_step_again(driver: WorkflowDriver) -> None:
    _failed_recoverable(driver)
    STATE["variant"] = "b"
    handle = weft.retry("r1")
    assert len(handle.id) == 32  # a random hex id
    driver.run_until_idle()
    weft.signal(handle.id, "go", 2)
    driver.run_until_idle()
    assert steplog(handle.id) == ["s0", "s1", "s2", "s3"]
    assert handle.result(timeout=0)["go"] == 2


@pytest.mark.parametrize("status", ["pending", "running", "waiting", "suspended", "completed"])
def test_retry_of_a_run_that_did_not_fail_is_refused(db: None, status: str) -> None:
    weft.start("tests.echo", workflow_id="e2")
    WorkflowRun.objects.filter(pk="e2").update(status=status)
    with pytest.raises(weft.WorkflowTerminalError, match="cannot be retried"):
        weft.retry("e2")
    assert WorkflowRun.objects.count() == 1


def test_retry_errors(db: None) -> None:
    with pytest.raises(weft.WorkflowNotFoundError):
        weft.retry("nope")
    weft.start("tests.echo", workflow_id="e3")
    weft.start("tests.echo", workflow_id="e4")
    weft.cancel("e3")
    with pytest.raises(weft.WorkflowAlreadyExistsError):
        weft.retry("e3", new_id="e4")
    with pytest.raises(weft.InvalidIdError):
        weft.retry("e3", new_id="")
    assert WorkflowRun.objects.count() == 2


def test_fork_carries_the_steps_before_n_and_runs_the_rest_once(driver: WorkflowDriver) -> None:
    _failed_recoverable(driver)
    old = kinds("r1")
    assert ("step", "s2") in old
    STATE["variant"] = "b"  # the bug is fixed
    CALLS.clear()
    handle = weft.fork("r1", from_step=2, new_id="r1-fork", by="alice", reason="fixed")
    run = WorkflowRun.objects.get(pk="r1-fork")
    assert (run.status, run.origin_id, run.origin_step) == (RunStatus.WAITING, "r1", 2)
    # Carried: s0, the recorded time and uuid, s1, the signal wait and the signal.
    carried = kinds("r1-fork")
    assert carried == old[: len(carried)]
    assert carried[-1] == ("signal", "go")
    driver.run_until_idle()
    assert steplog("r1-fork") == ["s2", "s3"]  # s0 and s1 ran zero times again
    assert CALLS["s0"] == CALLS["s1"] == 0
    assert CALLS["s2"] == CALLS["s3"] == 1
    result = handle.result(timeout=0)
    first = weft.get_handle("r1")
    assert result["go"] == {"n": 1}
    old_values = WorkflowEvent.objects.filter(run_id="r1", kind__in=["now", "uuid4"])
    assert [e.result for e in old_values] == [result["when"], result["token"]]
    assert first.describe().status == "failed"


def test_fork_from_zero_and_from_the_last_step(driver: WorkflowDriver) -> None:
    weft.start("tests.steps", 3, workflow_id="s")
    driver.run_until_idle()
    zero = weft.fork("s", 0)
    whole = weft.fork("s", 3)
    assert WorkflowRun.objects.get(pk=zero.id).status == RunStatus.PENDING
    assert kinds(whole.id) == kinds("s")
    driver.run_until_idle()
    assert steplog(zero.id) == ["s0", "s1", "s2"]
    assert steplog(whole.id) == []
    assert whole.result(timeout=0) == ["s0", "s1", "s2"]


def test_fork_refusals(driver: WorkflowDriver) -> None:
    weft.start("tests.steps", 2, workflow_id="s")
    with pytest.raises(weft.WorkflowTerminalError, match="cannot be forked"):
        weft.fork("s", 1)  # still pending
    driver.run_until_idle()
    with pytest.raises(weft.WorkflowForkError, match="recorded 2 step"):
        weft.fork("s", 3)
    with pytest.raises(weft.WorkflowForkError, match="0 or more"):
        weft.fork("s", -1)
    with pytest.raises(ValueError, match="step number"):
        weft.fork("s", True)  # type: ignore[arg-type]
    weft.start("tests.parent", "tests.child_add", 5, workflow_id="p")
    driver.run_until_idle()
    with pytest.raises(weft.WorkflowForkError, match="child workflow"):
        weft.fork("p", 1)
    assert WorkflowRun.objects.filter(origin_id__isnull=False).count() == 0


def test_cancel_with_children_cancels_the_unfinished_tree(driver: WorkflowDriver) -> None:
    weft.start("tests.tree", 3, workflow_id="t")
    driver.run_until_idle()
    ids = ["t", "t/child-0", "t/child-0/child-0"]
    assert (
        list(WorkflowRun.objects.filter(pk__in=ids).values_list("status", flat=True))
        == [RunStatus.WAITING] * 3
    )
    weft.start("tests.tree", 1, workflow_id="other")
    driver.run_until_idle()
    weft.get_handle("t").cancel(children=True, reason="tree", by="alice")
    runs = dict(WorkflowRun.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert set(runs.values()) == {RunStatus.CANCELLED}
    leaf = WorkflowRun.objects.get(pk="t/child-0/child-0")
    assert leaf.error["message"] == "cancelled by alice: tree (with t)"
    weft.signal("other", "release")
    driver.run_until_idle()
    assert steplog("t/child-0/child-0") == []
    assert weft.result("other", timeout=0) == "leaf"


def test_a_long_reason_is_cut_for_the_descendants(driver: WorkflowDriver) -> None:
    weft.start("tests.tree", 2, workflow_id="t")
    driver.run_until_idle()
    weft.cancel("t", children=True, reason="x" * 500)
    message = WorkflowRun.objects.get(pk="t/child-0").error["message"]
    assert message == "cancelled by an operator: " + "x" * 500


def test_cancel_without_children_leaves_them(driver: WorkflowDriver) -> None:
    weft.start("tests.tree", 2, workflow_id="t")
    driver.run_until_idle()
    weft.cancel("t")
    assert WorkflowRun.objects.get(pk="t/child-0").status == RunStatus.WAITING
    with pytest.raises(weft.WorkflowTerminalError):
        weft.cancel("t", children=True)  # the root is finished: refused, nothing done
    assert WorkflowRun.objects.get(pk="t/child-0").status == RunStatus.WAITING
