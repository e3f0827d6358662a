"""Validators: at the caller before anything is stored, and again at delivery."""

from __future__ import annotations

import pytest

import weft_django as weft
from weft_django import UpdateRejectedError
from weft_django.models import RunStatus, UpdateRequest, UpdateStatus, WorkflowEvent, WorkflowRun
from weft_django.testing import WorkflowDriver

from .conftest import answer, kinds, send, statuses


def test_a_validator_rejects_before_anything_is_stored(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="v1")
    driver.run_until_idle()
    for bad in (-1, 0, "3", True, None):
        with pytest.raises(UpdateRejectedError) as caught:
            weft.update("v1", "add", bad, timeout=5)
        assert "amount must be a positive int" in caught.value.message
    with pytest.raises(UpdateRejectedError) as caught:
        weft.update("v1", "add", -1, timeout=5, update_id="mine")
    assert caught.value.update_id == "mine"
    # The same message as a rejection at delivery (below).
    assert caught.value.message == "amount must be a positive int, got -1"
    assert not UpdateRequest.objects.filter(run_id="v1").exists()
    assert WorkflowRun.objects.get(pk="v1").wake_hint_at is None
    assert driver.run_until_idle() == {}
    assert kinds("v1") == [("wait", "signal:done")]


def test_a_request_stored_before_its_handler_existed_is_validated_at_delivery(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.late_handler", workflow_id="v2")
    assert driver.run_until_idle() == {"parked": 1}  # waits for "arm", no handler yet
    weft.signal("v2", "arm")
    # The caller's replay sees no handler: nothing to validate against, so it is stored.
    bad = send("v2", "add", -5)
    good = send("v2", "add", 5)
    assert statuses("v2") == {bad: UpdateStatus.PENDING, good: UpdateStatus.PENDING}

    assert driver.run_until_idle() == {"parked": 1}
    with pytest.raises(UpdateRejectedError) as caught:
        answer("v2", bad)
    assert caught.value.message == "amount must be a positive int, got -5"
    assert answer("v2", good) == 5
    rejected = UpdateRequest.objects.get(update_id=bad)
    assert rejected.status == UpdateStatus.REJECTED
    assert rejected.error == {
        "type": "ValueError",
        "message": "amount must be a positive int, got -5",
    }
    assert rejected.responded_at is not None and rejected.applied_seq is None
    # A rejection is an answer, not history: only the applied request is an event.
    assert [e.result["update_id"] for e in WorkflowEvent.objects.filter(kind="update")] == [good]

    # Now the handler is registered: the caller rejects without storing.
    with pytest.raises(UpdateRejectedError):
        weft.update("v2", "add", -6, timeout=5)
    assert UpdateRequest.objects.filter(run_id="v2").count() == 2

    weft.signal("v2", "done")
    driver.run_until_idle()
    assert weft.result("v2", timeout=0) == {"items": [5]}


def test_a_request_to_a_pending_run_is_validated_in_its_first_turn(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.counter", workflow_id="v3")
    bad = send("v3", "add", 0)
    assert driver.run_until_idle() == {"parked": 1}
    with pytest.raises(UpdateRejectedError, match="positive int, got 0"):
        answer("v3", bad)
    assert kinds("v3") == [("wait", "signal:done")]
    run = WorkflowRun.objects.get(pk="v3")
    assert run.status == RunStatus.WAITING


def test_a_rejected_request_leaves_no_wake_work_behind(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.late_handler", workflow_id="v4")
    driver.run_until_idle()
    weft.signal("v4", "arm")
    send("v4", "add", -1)
    driver.run_until_idle()
    assert not UpdateRequest.objects.filter(run_id="v4", status=UpdateStatus.PENDING).exists()
    assert driver.run_until_idle() == {}
