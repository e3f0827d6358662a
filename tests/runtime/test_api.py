"""The public verbs: start, get_handle, describe, result, and WorkflowHandle."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

import weft_django as weft
from weft_django import WorkflowFailedError, WorkflowNotFoundError
from weft_django.models import Claim, RunStatus, WorkflowRun
from weft_django.runtime.engine import TurnOutcome
from weft_django.testing import WorkflowDriver

from . import workflows


def test_public_names() -> None:
    for name in (
        "workflow",
        "start",
        "get_handle",
        "signal",
        "cancel",
        "suspend",
        "resume",
        "purge",
        "result",
        "describe",
        "WorkflowHandle",
        "WorkflowDescription",
        "Context",
        "RetryPolicy",
        "ChildHandle",
    ):
        assert getattr(weft, name) is not None, name
    with pytest.raises(AttributeError):
        weft.no_such_name  # noqa: B018


def test_start_stores_a_pending_run(db: None) -> None:
    handle = weft.start("tests.echo", 1, "two", workflow_id="a1", flag=True)
    assert handle == weft.WorkflowHandle("a1")
    assert handle.id == "a1"
    run = WorkflowRun.objects.get(pk="a1")
    assert run.status == RunStatus.PENDING
    assert run.workflow_name == "tests.echo"
    assert run.workflow_version == 1
    assert run.args == [1, "two"]
    assert run.kwargs == {"flag": True}
    assert run.parent_id == ""
    assert run.timeout_at is None
    assert not Claim.objects.filter(workflow_id="a1").exists()


def test_ids_differing_in_case_accents_or_trailing_spaces_are_distinct_runs(db: None) -> None:
    ids = ["order-1", "Order-1", "order-1 ", "ordér-1", "order-\U0001f600"]
    for index, workflow_id in enumerate(ids):
        weft.start("tests.echo", index, workflow_id=workflow_id)
    assert {run.pk: run.args for run in WorkflowRun.objects.all()} == {
        workflow_id: [index] for index, workflow_id in enumerate(ids)
    }
    assert WorkflowRun.objects.filter(pk="order-1").get().args == [0]
    with pytest.raises(weft.WorkflowAlreadyExistsError):
        weft.start("tests.echo", workflow_id="Order-1")


def test_start_by_function_and_generated_id(driver: WorkflowDriver) -> None:
    handle = weft.start(workflows.echo, x=1)
    assert len(handle.id) == 32
    assert WorkflowRun.objects.get(pk=handle.id).workflow_name == "tests.echo"
    driver.run_until_idle()
    assert handle.result(timeout=0) == {"args": [], "kwargs": {"x": 1}}


def test_get_handle(db: None) -> None:
    weft.start("tests.echo", workflow_id="a2")
    assert weft.get_handle("a2").id == "a2"
    with pytest.raises(WorkflowNotFoundError) as caught:
        weft.get_handle("missing")
    assert caught.value.workflow_id == "missing"


def test_describe_a_run_through_its_life(make_engine: Callable[..., Any]) -> None:
    weft.start("tests.collect_signals", "x", 2, workflow_id="a3")
    described = weft.describe("a3")
    assert described.workflow_id == "a3"
    assert described.workflow_name == "tests.collect_signals"
    assert described.workflow_version == 1
    assert described.status == RunStatus.PENDING
    assert (described.owner_engine_id, described.owner_hostname, described.epoch) == (
        None,
        None,
        0,
    )
    assert described.claim_expires_at is None
    assert (described.pending_signals, described.pending_updates) == (0, 0)

    engine = make_engine()
    engine.acquire("a3")
    assert engine.drive("a3") == TurnOutcome.PARKED, WorkflowRun.objects.get(pk="a3").error
    weft.signal("a3", "y", 1)
    weft.signal("a3", "y", 2)
    described = weft.get_handle("a3").describe()
    assert described.status == RunStatus.WAITING
    assert described.owner_engine_id == engine.engine_id
    assert described.owner_hostname == socket.gethostname()
    assert described.epoch == 1
    assert described.claim_expires_at is not None
    assert described.waiting_on == {"kind": "signal", "name": "x", "deadline": None}
    assert described.pending_signals == 2
    assert described.result is None and described.error is None

    weft.signal("a3", "x", "a")
    weft.signal("a3", "x", "b")
    assert engine.drive("a3") == TurnOutcome.COMPLETED
    described = weft.describe("a3")
    assert described.status == RunStatus.COMPLETED
    assert described.owner_engine_id is None
    assert described.epoch == 1
    assert described.waiting_on is None
    assert described.pending_signals == 2  # the two "y" signals were never consumed
    assert described.result == ["a", "b"]

    with pytest.raises(WorkflowNotFoundError):
        weft.describe("missing")


def test_result_of_a_failed_run(driver: WorkflowDriver) -> None:
    weft.start("tests.fails", workflow_id="a4")
    assert driver.run_until_idle() == {"failed": 1}
    with pytest.raises(WorkflowFailedError) as caught:
        weft.result("a4", timeout=0)
    assert caught.value.workflow_id == "a4"
    assert caught.value.error["type"] == "KeyError"
    assert "no such thing" in caught.value.error["message"]
    assert "Traceback" in caught.value.error["traceback"]


def test_result_times_out_while_the_run_is_not_terminal(transactional_db: None) -> None:
    """Outside a transaction (inside one, see test_result_in_a_transaction.py)."""
    weft.start("tests.echo", workflow_id="a5")
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="still pending"):
        weft.result("a5", timeout=0.05)
    assert time.monotonic() - started < 2
    with pytest.raises(WorkflowNotFoundError):
        weft.result("missing", timeout=0)


def test_handle_verbs(driver: WorkflowDriver) -> None:
    handle = weft.start("tests.collect_signals", "x", 1, workflow_id="a6")
    driver.run_until_idle()
    handle.suspend()
    assert handle.describe().status == RunStatus.SUSPENDED
    handle.resume()
    handle.signal("x", "v")
    driver.run_until_idle()
    assert handle.result(timeout=1) == ["v"]
    handle.purge()
    with pytest.raises(WorkflowNotFoundError):
        handle.describe()


class CountingRouter:
    """Routes nothing anywhere else, but records that weft asked."""

    asked: list[str] = []

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        self.asked.append(model.__name__)
        return "default"


def test_every_verb_takes_using_and_none_asks_the_router(
    driver: WorkflowDriver, settings: Any
) -> None:
    handle = weft.start("tests.steps", 1, workflow_id="routed", using="default")
    assert handle == weft.WorkflowHandle("routed") and handle.using == "default"
    driver.run_until_idle()
    assert weft.result("routed", timeout=5, using="default") == ["s0"]
    assert weft.describe("routed", using="default").status == RunStatus.COMPLETED
    assert weft.get_handle("routed", using="default").result(timeout=0) == ["s0"]

    CountingRouter.asked = []
    settings.DATABASE_ROUTERS = [f"{__name__}.CountingRouter"]
    assert weft.result("routed", timeout=0) == ["s0"]
    assert CountingRouter.asked == ["WorkflowRun"]
