"""Bad input to ``weft.update``: refused with a typed error, nothing stored, run unharmed."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError

import weft_django as weft
from weft_django import (
    PayloadError,
    UpdateRejectedError,
    WorkflowNotFoundError,
    WorkflowTerminalError,
)
from weft_django.models import RunStatus, UpdateRequest, UpdateStatus, WorkflowRun
from weft_django.testing import WorkflowDriver

from .conftest import answer, kinds, send


def _nothing_stored(run_id: str) -> None:
    assert not UpdateRequest.objects.filter(run_id=run_id).exists()
    assert WorkflowRun.objects.get(pk=run_id).wake_hint_at is None


@pytest.mark.parametrize("payload", [object(), {1, 2}, {"when": lambda: 1}, float("nan"), b"bytes"])
def test_a_payload_that_is_not_json_is_refused(driver: WorkflowDriver, payload: object) -> None:
    weft.start("tests.updates.counter", workflow_id="b1")
    driver.run_until_idle()
    with pytest.raises(PayloadError) as caught:
        weft.update("b1", "add", payload, timeout=5)
    assert "payload of update 'add'" in str(caught.value)
    _nothing_stored("b1")


def test_payloads_go_through_djangos_encoder(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.cart", workflow_id="b2")
    driver.run_until_idle()
    update_id = send("b2", "add", {"price": Decimal("1.50"), "at": datetime(2030, 1, 2)})
    driver.run_until_idle()
    assert answer("b2", update_id) == 1
    assert weft.query("b2", "items") == [{"price": "1.50", "at": "2030-01-02T00:00:00"}]


def test_an_oversized_payload_is_refused(db: None, weft_settings: Callable[..., None]) -> None:
    weft_settings(MAX_PAYLOAD_BYTES=64)
    with WorkflowDriver() as driver:
        weft.start("tests.updates.cart", workflow_id="b3")
        driver.run_until_idle()
        with pytest.raises(PayloadError, match="MAX_PAYLOAD_BYTES"):
            weft.update("b3", "add", "x" * 100, timeout=5)
        _nothing_stored("b3")
        small = send("b3", "add", "x" * 10)
        driver.run_until_idle()
        assert answer("b3", small) == 1


def test_an_oversized_response_fails_that_update_only(
    db: None, weft_settings: Callable[..., None]
) -> None:
    weft_settings(MAX_PAYLOAD_BYTES=200)
    with WorkflowDriver() as driver:
        weft.start("tests.updates.counter", workflow_id="b4")
        driver.run_until_idle()
        big = send("b4", "repeat", "z" * 30)  # 32 bytes in, 10 x 32 out
        fine = send("b4", "add", 1)
        assert driver.run_until_idle() == {"parked": 1}
        with pytest.raises(UpdateRejectedError, match="MAX_PAYLOAD_BYTES"):
            answer("b4", big)
        assert UpdateRequest.objects.get(update_id=big).status == UpdateStatus.FAILED
        assert answer("b4", fine)["total"] == 1
        assert WorkflowRun.objects.get(pk="b4").status == RunStatus.WAITING


def test_an_unknown_update_name_is_rejected_and_the_run_goes_on(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="b6")
    driver.run_until_idle()
    stray = send("b6", "no-such-update", {"a": 1})
    assert driver.run_until_idle() == {"parked": 1}
    with pytest.raises(UpdateRejectedError) as caught:
        weft.update("b6", "no-such-update", {"a": 1}, update_id=stray, timeout=5)
    assert "has no handler for update 'no-such-update'" in caught.value.message
    assert UpdateRequest.objects.get(update_id=stray).status == UpdateStatus.REJECTED
    run = WorkflowRun.objects.get(pk="b6")
    assert run.status == RunStatus.WAITING
    assert run.waiting_on == {"kind": "signal", "name": "done", "deadline": None}
    assert kinds("b6") == [("wait", "signal:done")]
    weft.signal("b6", "done", "ok")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("b6", timeout=0) == {"items": [], "total": 0, "signal": "ok"}


def test_an_update_to_a_missing_run_is_not_found(db: None) -> None:
    with pytest.raises(WorkflowNotFoundError):
        weft.update("nobody-here", "add", 1, timeout=5)
    with pytest.raises(WorkflowNotFoundError):
        weft.update("nobody-here", "add", 1, timeout=5, update_id="given")
    assert not UpdateRequest.objects.exists()


@pytest.mark.parametrize("ending", ["completed", "cancelled", "failed"])
def test_an_update_to_a_finished_run_is_refused(driver: WorkflowDriver, ending: str) -> None:
    weft.start("tests.updates.counter", workflow_id="b7")
    driver.run_until_idle()
    if ending == "completed":
        weft.signal("b7", "done")
        driver.run_until_idle()
    elif ending == "cancelled":
        weft.cancel("b7")
    else:
        WorkflowRun.objects.filter(pk="b7").update(status=RunStatus.FAILED)
    with pytest.raises(WorkflowTerminalError) as caught:
        weft.update("b7", "add", 1, timeout=5)
    assert caught.value.status == ending
    assert not UpdateRequest.objects.filter(run_id="b7").exists()


@pytest.mark.django_db(transaction=True)
def test_waiting_for_an_answer_inside_a_transaction_is_refused(driver: WorkflowDriver) -> None:
    """The owner cannot see a request before the caller's transaction commits: rather
    than hang until the timeout, ``update()`` refuses at once and stores nothing."""
    weft.start("tests.updates.counter", workflow_id="b9")
    driver.run_until_idle()
    began = time.monotonic()
    with (
        pytest.raises(TransactionManagementError, match="non_atomic_requests"),
        transaction.atomic(),
    ):
        weft.update("b9", "add", 1, timeout=5)
    assert time.monotonic() - began < 2
    _nothing_stored("b9")

    # timeout=0 stores the request with the transaction; it is applied after the commit.
    with transaction.atomic():
        update_id = send("b9", "add", 1)
    driver.run_until_idle()
    assert answer("b9", update_id)["total"] == 1
    # Collecting an answer that exists already works inside a transaction too.
    with transaction.atomic():
        assert weft.update("b9", "add", 1, update_id=update_id, timeout=5)["total"] == 1


@pytest.mark.parametrize(
    ("name", "update_id"),
    [("", None), (None, None), (7, None), ("x" * 256, None), ("add", ""), ("add", 5)],
)
def test_bad_names_and_update_ids_are_value_errors(
    driver: WorkflowDriver, name: object, update_id: object
) -> None:
    weft.start("tests.updates.counter", workflow_id="b8")
    driver.run_until_idle()
    with pytest.raises(ValueError):
        weft.update("b8", name, 1, timeout=5, update_id=update_id)  # type: ignore[arg-type]
    _nothing_stored("b8")
