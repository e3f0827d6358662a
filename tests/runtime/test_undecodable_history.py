"""Stored JSON weft does not decode (written before the depth limit, or by hand
with raw SQL): the worker fails the run once with a PayloadError, rejects such
an update, and a query says why; nothing raises RecursionError."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

import weft_django as weft
from tests.factories import deep_json_text, store_raw_json
from weft_django.models import (
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from weft_django.stored_json import UndecodableJSON
from weft_django.testing import WorkflowDriver

pytestmark = pytest.mark.django_db

#: Too deep to decode (any depth a 2 KB row reached before the limit), and a
#: number Python will not read (more than 4300 digits): both valid JSON.
UNREADABLE = {"deep": deep_json_text(950), "long number": "[" + "7" * 5000 + "]"}


def unreadable(case: str) -> str:
    if case == "deep" and connection.vendor == "mysql":
        pytest.skip("MariaDB's CHECK (JSON_VALID) refuses JSON this deep: no such row there")
    return UNREADABLE[case]


def check() -> str:
    return "checked"


@weft.workflow(name="tests.undecodable.step_then_wait")
def step_then_wait(ctx: weft.Context, *args: Any) -> Any:
    ctx.step(check, name="check")
    return ctx.wait_for_signal("go")


@weft.workflow(name="tests.undecodable.updates")
def with_updates(ctx: weft.Context) -> Any:
    state: dict[str, Any] = {}
    ctx.on_update("set")(lambda payload: state.update(value=payload))
    ctx.on_query("state")(lambda: state)
    return ctx.wait_for_signal("stop")


def failure(run_id: str) -> dict[str, Any]:
    run = WorkflowRun.objects.get(pk=run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None
    return run.error


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_a_run_whose_history_cannot_be_decoded_fails_once(case: str) -> None:
    driver = WorkflowDriver()
    weft.start("tests.undecodable.step_then_wait", workflow_id="u-history")
    driver.run_until_idle()
    store_raw_json(
        WorkflowEvent.objects.get(run_id="u-history", kind="step"), "result", unreadable(case)
    )
    weft.signal("u-history", "go", 1)
    assert driver.run_until_idle() == {"failed": 1}
    error = failure("u-history")
    assert error["type"] == "PayloadError"
    assert "result of event #0 (step 'check')" in error["message"]
    assert "cannot be decoded" in error["message"]


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_a_run_whose_arguments_cannot_be_decoded_fails(case: str) -> None:
    weft.start("tests.undecodable.step_then_wait", 1, workflow_id="u-args")
    store_raw_json(WorkflowRun.objects.get(pk="u-args"), "args", unreadable(case))
    assert WorkflowDriver().run_until_idle() == {"failed": 1}
    assert "args of run 'u-args'" in failure("u-args")["message"]


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_a_signal_that_cannot_be_decoded_fails_the_run_naming_it(case: str) -> None:
    driver = WorkflowDriver()
    weft.start("tests.undecodable.step_then_wait", workflow_id="u-signal")
    driver.run_until_idle()
    weft.signal("u-signal", "go", 1)
    store_raw_json(WorkflowSignal.objects.get(run_id="u-signal"), "payload", unreadable(case))
    assert driver.run_until_idle() == {"failed": 1}
    assert "payload of signal 'go'" in failure("u-signal")["message"]


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_an_update_that_cannot_be_decoded_is_rejected_and_the_run_goes_on(case: str) -> None:
    driver = WorkflowDriver()
    weft.start("tests.undecodable.updates", workflow_id="u-update")
    driver.run_until_idle()
    with pytest.raises(weft.UpdateTimeoutError):
        weft.update("u-update", "set", 1, timeout=0, update_id="u1")
    store_raw_json(UpdateRequest.objects.get(update_id="u1"), "payload", unreadable(case))
    driver.run_until_idle()
    request = UpdateRequest.objects.get(update_id="u1")
    assert request.status == UpdateStatus.REJECTED
    assert "payload of update 'set'" in request.error["message"]
    assert weft.query("u-update", "state") == {}
    weft.signal("u-update", "stop", "done")
    driver.run_until_idle()
    assert weft.result("u-update", timeout=0) == "done"


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_a_query_on_a_history_that_cannot_be_decoded_says_why(case: str) -> None:
    driver = WorkflowDriver()
    weft.start("tests.undecodable.updates", workflow_id="u-query")
    driver.run_until_idle()
    store_raw_json(WorkflowRun.objects.get(pk="u-query"), "kwargs", unreadable(case))
    with pytest.raises(weft.QueryError, match="cannot be decoded"):
        weft.query("u-query", "state")


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_the_model_reads_a_placeholder(case: str) -> None:
    weft.start("tests.undecodable.step_then_wait", workflow_id="u-model")
    store_raw_json(WorkflowRun.objects.get(pk="u-model"), "args", unreadable(case))
    value = WorkflowRun.objects.get(pk="u-model").args
    assert isinstance(value, UndecodableJSON)
    assert str(value).startswith("(payload cannot be shown: ")
