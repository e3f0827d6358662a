"""``update_id``: a repeat returns the first result; racing repeats store one request."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

import weft_django as weft
from weft_django import UpdateRejectedError, UpdateTimeoutError
from weft_django.api import updates as updates_module
from weft_django.models import UpdateRequest, UpdateStatus, WorkflowEvent, WorkflowRun
from weft_django.testing import WorkflowDriver

from .conftest import answer, send


def _events(run_id: str) -> int:
    return WorkflowEvent.objects.filter(run_id=run_id, kind="update").count()


def test_a_sequential_repeat_returns_the_first_result_without_a_second_event(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.counter", workflow_id="i1")
    driver.run_until_idle()
    send("i1", "add", 2, update_id="once")
    driver.run_until_idle()
    first = weft.update("i1", "add", 2, update_id="once", timeout=0)
    assert first["total"] == 2

    again = weft.update("i1", "add", 2, update_id="once", timeout=0)
    different_payload = weft.update("i1", "add", 50, update_id="once", timeout=0)
    assert again == different_payload == first
    # No second request, no wake-up for the owner, nothing to apply.
    assert UpdateRequest.objects.filter(run_id="i1").count() == 1
    assert WorkflowRun.objects.get(pk="i1").wake_hint_at is None
    assert driver.run_until_idle() == {}
    assert _events("i1") == 1
    assert weft.query("i1", "total") == 2


@pytest.mark.django_db(transaction=True)  # a caller that waits must not be in a transaction
def test_a_timed_out_update_stays_stored_and_is_applied_later(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="i0")
    driver.run_until_idle()
    began = time.monotonic()
    with pytest.raises(UpdateTimeoutError) as caught:
        weft.update("i0", "add", 6, timeout=0.2)  # nobody drives the run meanwhile
    assert time.monotonic() - began >= 0.2
    update_id = caught.value.update_id
    assert isinstance(caught.value, TimeoutError)
    assert update_id in str(caught.value)
    row = UpdateRequest.objects.get(run_id="i0")
    assert (row.update_id, row.status, row.payload) == (update_id, UpdateStatus.PENDING, 6)

    assert driver.run_until_idle() == {"parked": 1}
    assert weft.update("i0", "add", 6, update_id=update_id, timeout=0)["total"] == 6
    assert _events("i0") == 1


def test_a_repeat_after_the_run_ended_still_returns_the_result(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="i2")
    driver.run_until_idle()
    send("i2", "add", 3, update_id="k")
    driver.run_until_idle()
    weft.signal("i2", "done")
    driver.run_until_idle()
    assert weft.result("i2", timeout=0)["total"] == 3
    assert weft.update("i2", "add", 3, update_id="k", timeout=0)["total"] == 3
    with pytest.raises(weft.WorkflowTerminalError):
        weft.update("i2", "add", 3, update_id="new", timeout=0)


def test_a_repeat_of_a_rejected_update_is_rejected_again(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="i3")
    driver.run_until_idle()
    send("i3", "explode", 1, update_id="bad")
    driver.run_until_idle()
    for _ in range(2):
        with pytest.raises(UpdateRejectedError, match="handler exploded"):
            weft.update("i3", "explode", 1, update_id="bad", timeout=0)
    assert UpdateRequest.objects.filter(run_id="i3").count() == 1


def test_update_ids_are_per_run(driver: WorkflowDriver) -> None:
    for run in ("i4a", "i4b"):
        weft.start("tests.updates.counter", workflow_id=run)
    driver.run_until_idle()
    send("i4a", "add", 1, update_id="shared")
    send("i4b", "add", 7, update_id="shared")
    driver.run_until_idle()
    assert answer("i4a", "shared")["total"] == 1
    assert answer("i4b", "shared")["total"] == 7


@pytest.mark.django_db(transaction=True)
def test_racing_repeats_store_one_request_and_both_get_its_answer(
    weft_settings: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two callers with one update_id, both past the "already stored?" check before
    either inserts: one row, one event, one answer for both."""
    with WorkflowDriver() as driver:
        weft.start("tests.updates.counter", workflow_id="i5")
        driver.run_until_idle()

        both_checked = threading.Barrier(2, timeout=10)
        real = updates_module.prevalidate_update

        def prevalidate_in_step(*args: Any, **kwargs: Any) -> None:
            real(*args, **kwargs)
            both_checked.wait()  # neither inserts before both saw no row

        monkeypatch.setattr(updates_module, "prevalidate_update", prevalidate_in_step)
        results: list[Any] = []
        errors: list[BaseException] = []

        def caller() -> None:
            try:
                results.append(weft.update("i5", "add", 4, update_id="twin", timeout=20))
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=caller) for _ in range(2)]
        for thread in threads:
            thread.start()
        while not UpdateRequest.objects.filter(run_id="i5").exists():
            assert all(t.is_alive() for t in threads), errors
        driver.run_until_idle()
        for thread in threads:
            thread.join(20)
        assert not errors, errors
        assert len(results) == 2 and results[0] == results[1]
        assert results[0]["total"] == 4
        assert UpdateRequest.objects.filter(run_id="i5").count() == 1
        assert _events("i5") == 1
        assert weft.query("i5", "total") == 4
