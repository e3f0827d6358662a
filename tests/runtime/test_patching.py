"""ctx.patched / ctx.deprecate_patch: old runs keep their path, new runs take the
new one, across a worker restart; recovery of a run a change suspended."""

from __future__ import annotations

from typing import Any

import pytest

import weft_django as weft
from weft_django import InvalidIdError
from weft_django.inspection.timeline import describe, describe_without_payload
from weft_django.models import RunStatus, WorkflowEvent, WorkflowRun
from weft_django.runtime.replay_check import check_run, runs_to_check
from weft_django.testing import WorkflowDriver

from .conftest import kinds, steplog
from .workflows import STATE

OLD_PATH = [("step", "first"), ("wait", "signal:go"), ("signal", "go"), ("step", "last")]
NEW_PATH = [
    ("step", "first"),
    ("patch", "add-extra"),
    ("step", "extra"),
    ("wait", "signal:go"),
    ("signal", "go"),
    ("step", "last"),
]


def restart(driver: WorkflowDriver) -> WorkflowDriver:
    """A worker restart: this engine stops (claims released), a new one starts."""
    driver.stop()
    return WorkflowDriver()


def replay_ok(run_id: str) -> bool:
    [run] = runs_to_check(run_ids=[run_id])
    return check_run(run).ok


def test_old_and_new_runs_each_keep_their_path_across_a_restart(driver: WorkflowDriver) -> None:
    weft.start("tests.patchable", workflow_id="before")  # the code before the change
    assert driver.run_until_idle() == {"parked": 1}

    STATE["patch"] = "patched"  # the deploy: the change behind ctx.patched
    driver = restart(driver)
    try:
        weft.start("tests.patchable", workflow_id="after")
        # "before" was released at the restart: taken again, replayed on the new code.
        assert driver.run_until_idle() == {"parked": 2}
        assert kinds("after")[:3] == NEW_PATH[:3]
        driver = restart(driver)
        for run_id in ("before", "after"):
            weft.signal(run_id, "go")
        assert driver.run_until_idle() == {"completed": 2}
    finally:
        driver.stop()
    assert weft.result("before", timeout=0) == "old"
    assert weft.result("after", timeout=0) == "new"
    assert kinds("before") == OLD_PATH
    assert kinds("after") == NEW_PATH  # one marker, though patched() was asked twice
    assert steplog("before") == ["first", "last"]
    assert steplog("after") == ["first", "extra", "last"]
    # The marker is an ordinary event, written under the run's claim (fenced).
    marker = WorkflowEvent.objects.get(run_id="after", kind="patch")
    step = WorkflowEvent.objects.get(run_id="after", name="extra")
    assert (marker.engine_id, marker.epoch) == (step.engine_id, step.epoch)
    assert describe(marker) == "patch add-extra: the run takes its new path"
    assert describe_without_payload(marker) == "patch add-extra"


def test_deprecate_patch_replays_with_and_without_the_marker(driver: WorkflowDriver) -> None:
    STATE["patch"] = "patched"
    weft.start("tests.patchable", workflow_id="marked")
    driver.run_until_idle()
    STATE["patch"] = "deprecated"  # no unmarked run past the point is left
    weft.start("tests.patchable", workflow_id="unmarked")
    driver.run_until_idle()
    assert ("patch", "add-extra") not in kinds("unmarked")  # nothing recorded live
    assert replay_ok("marked") and replay_ok("unmarked")
    for run_id in ("marked", "unmarked"):
        weft.signal(run_id, "go")
    assert driver.run_until_idle() == {"completed": 2}
    assert weft.result("marked", timeout=0) == weft.result("unmarked", timeout=0) == "new"
    # Once the marked runs are gone, the call can go too: "unmarked" replays without it.
    STATE["patch"] = "new"
    assert replay_ok("unmarked") and not replay_ok("marked")


def test_a_change_without_a_patch_is_caught_and_a_fixing_deploy_resumes(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.patchable", workflow_id="old")
    driver.run_until_idle()
    STATE["patch"] = "reordered"  # the extra step added with no patched() around it
    assert not replay_ok("old")  # the replay check would have said so
    weft.signal("old", "go")
    assert driver.run_until_idle() == {"suspended": 1}
    run = WorkflowRun.objects.get(pk="old")
    assert run.error["type"] == "NonDeterminismError"
    assert "step('extra')" in run.error["message"]  # what the run page shows

    STATE["patch"] = "patched"  # the fixing deploy
    assert replay_ok("old")
    weft.resume("old")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("old", timeout=0) == "old"
    assert WorkflowRun.objects.get(pk="old").status == RunStatus.COMPLETED


def test_a_run_resumes_on_its_own_version_after_a_fix(driver: WorkflowDriver) -> None:
    weft.start("tests.versioned", version=1, workflow_id="v1-run")
    driver.run_until_idle()
    # Suspended by hand (as a divergence would): resuming replays with v1, not v2.
    weft.suspend("v1-run", reason="test")
    weft.resume("v1-run")
    weft.signal("v1-run", "go")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("v1-run", timeout=0) == {"code": 1, "version": 1}


@pytest.mark.parametrize("change_id", ["", 7, "x" * 256])
def test_a_bad_change_id_is_refused(driver: WorkflowDriver, change_id: Any) -> None:
    @weft.workflow(name="tests.scratch.bad_patch")
    def bad_patch(ctx: Any) -> bool:
        return bool(ctx.patched(change_id))

    try:
        weft.start("tests.scratch.bad_patch", workflow_id="bad")
        assert driver.run_until_idle() == {"failed": 1}
        error = WorkflowRun.objects.get(pk="bad").error
        assert error["type"] == InvalidIdError.__name__
        assert not WorkflowEvent.objects.filter(run_id="bad").exists()
    finally:
        from weft_django.runtime import registry

        registry.unregister("tests.scratch.bad_patch")
