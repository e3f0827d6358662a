"""``ctx.wait_for_update`` and ``Update.respond``: delivered once, answered once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import weft_django as weft
from weft_django import UpdateRejectedError, WorkflowTerminalError
from weft_django.models import RunStatus, UpdateRequest, UpdateStatus, WorkflowEvent, WorkflowRun
from weft_django.runtime.engine import TurnOutcome
from weft_django.testing import WorkflowDriver

from .conftest import answer, expire_lease, kinds, send, statuses
from .workflows import CALLS, LOG


def test_waiter_receives_the_update_and_its_respond_answers_the_caller(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.approval", workflow_id="w1")
    assert driver.run_until_idle() == {"parked": 1}
    run = WorkflowRun.objects.get(pk="w1")
    assert run.waiting_on == {"kind": "update", "name": "approve", "deadline": None}

    update_id = send("w1", "approve", "alice")
    assert driver.run_until_idle() == {"parked": 1}
    assert answer("w1", update_id) == {"approved": "alice", "update_id": update_id}
    request = UpdateRequest.objects.get(update_id=update_id)
    assert request.status == UpdateStatus.APPLIED and request.applied_seq == 1
    assert kinds("w1") == [
        ("wait", "update:approve"),
        ("update_wait", "approve"),
        ("update_response", update_id),
        ("wait", "signal:finish"),
    ]
    assert WorkflowRun.objects.get(pk="w1").waiting_on["name"] == "finish"
    weft.signal("w1", "finish")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("w1", timeout=0) == {"approved": "alice"}


def test_a_request_stored_before_the_wait_is_taken_without_parking(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.approval", workflow_id="w2")
    update_id = send("w2", "approve", "bob")
    assert driver.run_until_idle() == {"parked": 1}
    assert answer("w2", update_id)["approved"] == "bob"
    assert kinds("w2") == [
        ("update_wait", "approve"),
        ("update_response", update_id),
        ("wait", "signal:finish"),
    ]


def test_respond_twice_answers_once_and_replay_never_re_answers(
    make_engine: Callable[..., Any],
) -> None:
    engine_a = make_engine()
    weft.start("tests.updates.approval", respond_twice=True, workflow_id="w3")
    engine_a.acquire("w3")
    engine_a.drive("w3")
    update_id = send("w3", "approve", "carol")
    assert engine_a.drive("w3") == TurnOutcome.PARKED
    assert answer("w3", update_id) == {"approved": "carol", "update_id": update_id}
    first = UpdateRequest.objects.get(update_id=update_id)
    assert WorkflowEvent.objects.filter(run_id="w3", kind="update_response").count() == 1

    # A later turn on another engine replays the delivery and both respond() calls.
    expire_lease(engine_a)
    engine_b = make_engine()
    engine_b.acquire("w3")
    weft.signal("w3", "finish")
    assert engine_b.drive("w3") == TurnOutcome.COMPLETED
    again = UpdateRequest.objects.get(update_id=update_id)
    assert (again.status, again.response, again.responded_at) == (
        UpdateStatus.APPLIED,
        first.response,
        first.responded_at,
    )
    assert WorkflowEvent.objects.filter(run_id="w3", kind="update_response").count() == 1
    assert CALLS["approve_received"] == 2  # delivered once, replayed once
    assert UpdateRequest.objects.filter(run_id="w3").count() == 1


def test_wait_for_update_times_out(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.approval", timeout=60, workflow_id="w4")
    assert driver.run_until_idle() == {"parked": 1}
    assert WorkflowRun.objects.get(pk="w4").wake_at is not None
    driver.advance(61)
    assert weft.result("w4", timeout=0) == {"timed_out": True}
    assert kinds("w4") == [("wait", "update:approve"), ("update_wait", "approve")]
    timed_out = WorkflowEvent.objects.get(run_id="w4", kind="update_wait")
    assert timed_out.error == {"timeout": True}
    # A request arriving after the run ended is refused.
    with pytest.raises(WorkflowTerminalError):
        weft.update("w4", "approve", "late", timeout=0)


def test_handlers_before_waiters_in_arrival_order(driver: WorkflowDriver) -> None:
    """Pending: add(a), checkout, add(b). The handler applies ``a``, then the waiter
    takes ``checkout`` (its answer sees ``a`` only); ``b`` arrived after it."""
    weft.start("tests.updates.cart", workflow_id="w5")
    assert driver.run_until_idle() == {"parked": 1}
    a = send("w5", "add", "a")
    checkout = send("w5", "checkout", "now")
    b = send("w5", "add", "b")
    assert driver.run_until_idle() == {"completed": 1}
    assert answer("w5", a) == 1
    assert answer("w5", checkout) == {"items": ["a"], "note": "now"}
    # The run ended right after the checkout: ``b`` was never applied.
    with pytest.raises(WorkflowTerminalError) as caught:
        answer("w5", b)
    assert caught.value.status == RunStatus.COMPLETED
    assert statuses("w5")[b] == UpdateStatus.REJECTED
    assert weft.result("w5", timeout=0) == {"items": ["a"]}
    assert weft.query("w5", "items") == ["a"]  # replay re-applies ``a`` before the waiter
    assert kinds("w5") == [
        ("wait", "update:checkout"),
        ("update", "add"),
        ("update_wait", "checkout"),
        ("update_response", checkout),
    ]


def test_an_update_for_a_name_nobody_waits_for_is_rejected(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.cart", workflow_id="w6")
    driver.run_until_idle()
    stray = send("w6", "refund", 1)
    assert driver.run_until_idle() == {"parked": 1}
    with pytest.raises(UpdateRejectedError) as caught:
        answer("w6", stray)
    assert "no handler" in caught.value.message and "refund" in caught.value.message
    assert kinds("w6") == [("wait", "update:checkout")]
    run = WorkflowRun.objects.get(pk="w6")
    assert run.status == RunStatus.WAITING and run.waiting_on["name"] == "checkout"


def test_a_respond_that_raised_payload_error_can_be_retried(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.respond_retry", workflow_id="w7")
    driver.run_until_idle()
    update_id = send("w7", "approve", "x")
    assert driver.run_until_idle() == {"completed": 1}
    assert LOG == ["PayloadError"]
    assert answer("w7", update_id) == {"fallback": "x"}
    assert kinds("w7")[-1] == ("update_response", update_id)
