"""Answered requests are kept ``UPDATE_RESPONSE_TTL``, then purged; pending ones never."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import weft_django as weft
from weft_django.models import UpdateRequest, UpdateStatus, WorkflowEvent
from weft_django.ownership.clock import db_now
from weft_django.runtime.inbox import purge_expired_updates
from weft_django.runtime.runs import expire_timed_out
from weft_django.testing import WorkflowDriver
from weft_django.worker import Worker

from .conftest import answer, send, statuses


def _requests(run_id: str) -> dict[str, str]:
    return dict(UpdateRequest.objects.filter(run_id=run_id).values_list("update_id", "status"))


def test_expiry_is_the_answer_time_plus_the_ttl(
    db: None, weft_settings: Callable[..., None]
) -> None:
    weft_settings(UPDATE_RESPONSE_TTL=120)  # read by engines created after this
    driver = WorkflowDriver()
    weft.start("tests.updates.counter", workflow_id="c1")
    driver.run_until_idle()
    update_id = send("c1", "add", 1)
    assert UpdateRequest.objects.get(update_id=update_id).expires_at is None
    driver.run_until_idle()
    row = UpdateRequest.objects.get(update_id=update_id)
    assert row.expires_at - row.responded_at == timedelta(seconds=120)
    assert purge_expired_updates() == 0
    assert answer("c1", update_id)["total"] == 1


def test_purge_deletes_answered_rows_past_their_expiry_only(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="c2")
    weft.start("tests.updates.approval", workflow_id="c3")
    driver.run_until_idle()
    applied = send("c2", "add", 1)
    failed = send("c2", "explode", 1)
    rejected = send("c2", "nobody-handles-this", 1)
    fresh = send("c2", "add", 2)
    delivered = send("c3", "approve", "x")
    driver.run_until_idle()
    pending = send("c2", "add", 3)  # not applied yet
    UpdateRequest.objects.filter(update_id=delivered).update(status=UpdateStatus.DELIVERED)
    assert _requests("c2") == {
        applied: UpdateStatus.APPLIED,
        failed: UpdateStatus.FAILED,
        rejected: UpdateStatus.REJECTED,
        fresh: UpdateStatus.APPLIED,
        pending: UpdateStatus.PENDING,
    }
    past = db_now() - timedelta(seconds=1)
    UpdateRequest.objects.filter(update_id__in=[applied, failed, rejected, delivered]).update(
        expires_at=past
    )
    # Never set on an unanswered request; even if it were, it is not purged.
    UpdateRequest.objects.filter(update_id=pending).update(expires_at=past)

    assert purge_expired_updates() == 3
    assert _requests("c2") == {fresh: UpdateStatus.APPLIED, pending: UpdateStatus.PENDING}
    assert _requests("c3") == {delivered: UpdateStatus.DELIVERED}
    # History is not touched: the applied updates still replay.
    assert WorkflowEvent.objects.filter(run_id="c2", kind="update").count() == 3
    assert weft.query("c2", "total") == 3  # add(1) and add(2); explode changed nothing


def test_a_small_ttl_expires_answers_and_an_old_update_id_becomes_new(
    db: None, weft_settings: Callable[..., None]
) -> None:
    weft_settings(UPDATE_RESPONSE_TTL=0.001)
    driver = WorkflowDriver()
    weft.start("tests.updates.counter", workflow_id="c4")
    driver.run_until_idle()
    send("c4", "add", 5, update_id="reused")
    driver.run_until_idle()
    assert answer("c4", "reused")["total"] == 5
    _wait_until_past(UpdateRequest.objects.get(update_id="reused").expires_at)
    assert purge_expired_updates() == 1
    assert not UpdateRequest.objects.filter(run_id="c4").exists()

    # After the TTL, the same update_id is a new request, applied again.
    send("c4", "add", 5, update_id="reused")
    driver.run_until_idle()
    assert answer("c4", "reused")["total"] == 10
    assert WorkflowEvent.objects.filter(run_id="c4", kind="update").count() == 2


def test_the_worker_purges_expired_answers_in_its_timeout_pass(
    make_engine: Callable[..., Any], driver: WorkflowDriver
) -> None:
    weft.start("tests.updates.counter", workflow_id="c5")
    driver.run_until_idle()
    done = send("c5", "add", 1)
    driver.run_until_idle()
    waiting = send("c5", "add", 2)
    UpdateRequest.objects.filter(update_id=done).update(expires_at=db_now() - timedelta(hours=1))
    Worker(engine=make_engine(), install_signal_handlers=False).passes.timeouts()
    assert _requests("c5") == {waiting: UpdateStatus.PENDING}


def test_purging_the_run_deletes_its_requests(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="c6")
    driver.run_until_idle()
    send("c6", "add", 1)
    weft.purge("c6")
    assert not UpdateRequest.objects.filter(run_id="c6").exists()


def _wait_until_past(moment: Any) -> None:
    for _ in range(200):
        if db_now() > moment:
            return
        time.sleep(0.01)
    pytest.fail("the database clock did not move past the expiry")


@pytest.mark.parametrize("verb", ["cancel", "expire"])
def test_an_operator_ending_the_run_closes_its_open_requests(
    make_engine: Callable[..., Any], verb: str
) -> None:
    from weft_django.models import WorkflowRun

    engine = make_engine()
    weft.start("tests.updates.counter", workflow_id=f"close-{verb}")
    engine.acquire(f"close-{verb}")
    engine.drive(f"close-{verb}")
    request = send(f"close-{verb}", "add", 1)
    if verb == "cancel":
        weft.cancel(f"close-{verb}")
    else:
        WorkflowRun.objects.filter(pk=f"close-{verb}").update(timeout_at=db_now())
        assert f"close-{verb}" in expire_timed_out()
    assert statuses(f"close-{verb}") == {request: UpdateStatus.REJECTED}
    assert weft.describe(f"close-{verb}").pending_updates == 0
    with pytest.raises(weft.WorkflowTerminalError):
        answer(f"close-{verb}", request)
