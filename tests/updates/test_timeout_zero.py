"""``update(timeout=0)``: store the request and look for its answer once. It
returns an answer that is there, and otherwise raises ``UpdateTimeoutError`` at
once (its ``update_id`` collects the answer later); inside a transaction that
error is the caller's to catch inside the block, as the refusal says."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError

import weft_django as weft
from weft_django import UpdateRejectedError, UpdateTimeoutError
from weft_django.models import UpdateRequest, UpdateStatus
from weft_django.testing import WorkflowDriver

from .conftest import send


def test_a_new_request_is_stored_and_the_call_raises_at_once(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="tz1")
    driver.run_until_idle()
    with pytest.raises(UpdateTimeoutError) as caught:
        weft.update("tz1", "add", 2, timeout=0)
    request = UpdateRequest.objects.get(run_id="tz1")
    assert (request.update_id, request.status) == (caught.value.update_id, UpdateStatus.PENDING)
    assert "call update() again with the same update_id" in str(caught.value)
    driver.run_until_idle()
    answer = weft.update("tz1", "add", 2, update_id=caught.value.update_id, timeout=0)
    assert answer["total"] == 2  # an answer that is there is returned, not raised


def test_the_refusal_inside_a_transaction_says_to_catch_the_timeout_there(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.counter", workflow_id="tz2")
    driver.run_until_idle()
    with pytest.raises(TransactionManagementError) as caught, transaction.atomic():
        weft.update("tz2", "add", 1, timeout=5)
    message = str(caught.value)
    assert "timeout=0" in message
    assert "raises UpdateTimeoutError at once, which you catch inside the atomic block" in message
    assert "rolls back, the request with it" in message
    assert not UpdateRequest.objects.filter(run_id="tz2").exists()


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_uncaught_timeout_rolls_the_request_back() -> None:
    with WorkflowDriver() as driver:
        weft.start("tests.updates.counter", workflow_id="tz3")
        driver.run_until_idle()
        with pytest.raises(UpdateTimeoutError), transaction.atomic():
            weft.update("tz3", "add", 1, timeout=0)  # not caught inside the block
        assert not UpdateRequest.objects.filter(run_id="tz3").exists()

        with transaction.atomic():  # caught inside: stored with the commit
            update_id = send("tz3", "add", 4)
        driver.run_until_idle()
        assert weft.update("tz3", "add", 4, update_id=update_id, timeout=0)["total"] == 4


def test_a_handler_that_raised_is_reported_as_failed_not_rejected(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.counter", workflow_id="tz4")
    driver.run_until_idle()
    update_id = send("tz4", "explode", 7)
    driver.run_until_idle()
    with pytest.raises(UpdateRejectedError) as caught:
        weft.update("tz4", "explode", 7, update_id=update_id, timeout=0)
    assert caught.value.status == "failed"
    assert caught.value.message == "RuntimeError: handler exploded on 7"
    assert str(caught.value) == (
        f"Update {update_id!r} failed in its handler: RuntimeError: handler exploded on 7"
    )
    # A validator's refusal is a rejection, its message as the validator gave it.
    with pytest.raises(UpdateRejectedError) as refused:
        weft.update("tz4", "add", 0, timeout=0)
    assert refused.value.status == "rejected"
    assert str(refused.value).endswith("was rejected: amount must be a positive int, got 0")
