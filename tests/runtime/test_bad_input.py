"""Bad input is refused with a typed error before anything is stored."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

import weft_django as weft
from weft_django import (
    PayloadError,
    WorkflowAlreadyExistsError,
    WorkflowNotRegisteredError,
)
from weft_django.models import Claim, RunStatus, WorkflowEvent, WorkflowRun, WorkflowSignal
from weft_django.testing import WorkflowDriver

from .conftest import kinds
from .workflows import CALLS

NOT_REGISTERED = "tests.runtime.not_registered"


def _nothing_stored() -> None:
    assert WorkflowRun.objects.count() == 0
    assert WorkflowEvent.objects.count() == 0
    assert WorkflowSignal.objects.count() == 0
    assert Claim.objects.count() == 0


def test_unknown_workflow_name(db: None) -> None:
    with pytest.raises(WorkflowNotRegisteredError) as caught:
        weft.start("tests.no_such_workflow", 1, workflow_id="b1")
    assert caught.value.name == "tests.no_such_workflow"
    assert "tests.no_such_workflow" in str(caught.value)
    _nothing_stored()


def test_dotted_path_of_an_unregistered_function_is_never_imported(db: None) -> None:
    assert NOT_REGISTERED not in sys.modules
    with pytest.raises(WorkflowNotRegisteredError):
        weft.start(f"{NOT_REGISTERED}.launch_missiles", workflow_id="b2")
    assert NOT_REGISTERED not in sys.modules
    _nothing_stored()


def test_an_undecorated_function_is_not_a_workflow(db: None) -> None:
    def plain(ctx: Any) -> None:
        raise AssertionError("never runs")

    with pytest.raises(WorkflowNotRegisteredError):
        weft.start(plain)
    _nothing_stored()


@pytest.mark.parametrize(
    ("args", "kwargs", "culprit"),
    [
        ((1, object()), {}, "argument 1 of workflow 'tests.echo'"),
        ((), {"when": {1, 2}}, "keyword argument 'when' of workflow 'tests.echo'"),
        ((float("nan"),), {}, "argument 0 of workflow 'tests.echo'"),
        ((b"bytes",), {}, "argument 0 of workflow 'tests.echo'"),
    ],
)
def test_non_json_arguments(
    db: None, args: tuple[Any, ...], kwargs: dict[str, Any], culprit: str
) -> None:
    with pytest.raises(PayloadError) as caught:
        weft.start("tests.echo", *args, workflow_id="b3", **kwargs)
    assert caught.value.what == culprit
    assert "not JSON-serialisable" in caught.value.reason
    assert str(caught.value).startswith(culprit)
    _nothing_stored()


def test_arguments_go_through_djangos_encoder(driver: WorkflowDriver) -> None:
    when = datetime(2024, 5, 1, 12, 30)
    weft.start("tests.echo", Decimal("1.50"), when=when, workflow_id="b4")
    assert WorkflowRun.objects.get(pk="b4").args == ["1.50"]
    driver.run_until_idle()
    assert weft.result("b4", timeout=0) == {"args": ["1.50"], "kwargs": {"when": when.isoformat()}}


def test_oversized_arguments(db: None, weft_settings: Callable[..., None]) -> None:
    weft_settings(MAX_PAYLOAD_BYTES=100)
    with pytest.raises(PayloadError) as caught:
        weft.start("tests.echo", "x" * 200, workflow_id="b5")
    assert caught.value.what == "arguments of workflow 'tests.echo'"
    assert "over WEFT['MAX_PAYLOAD_BYTES'] (100)" in caught.value.reason
    with pytest.raises(PayloadError) as caught:
        weft.start("tests.echo", big="y" * 200, workflow_id="b5")
    assert caught.value.what == "keyword arguments of workflow 'tests.echo'"
    _nothing_stored()
    weft.start("tests.echo", "x" * 50, workflow_id="b5")  # under the limit: fine
    assert WorkflowRun.objects.filter(pk="b5").exists()


def test_signal_payload_that_is_not_json(driver: WorkflowDriver) -> None:
    weft.start("tests.collect_signals", "x", 1, workflow_id="b6")
    with pytest.raises(PayloadError) as caught:
        weft.signal("b6", "x", {"obj": object()})
    assert caught.value.what == "payload of signal 'x'"
    assert WorkflowSignal.objects.count() == 0
    assert WorkflowRun.objects.get(pk="b6").wake_hint_at is None


def test_signal_payload_over_the_limit(db: None, weft_settings: Callable[..., None]) -> None:
    weft.start("tests.collect_signals", "x", 1, workflow_id="b7")
    weft_settings(MAX_PAYLOAD_BYTES=64)
    with pytest.raises(PayloadError, match="MAX_PAYLOAD_BYTES"):
        weft.signal("b7", "x", "z" * 100)
    assert WorkflowSignal.objects.count() == 0
    weft.signal("b7", "x", "z" * 10)
    assert WorkflowSignal.objects.count() == 1


def test_step_result_that_is_not_json_fails_the_run(driver: WorkflowDriver) -> None:
    weft.start("tests.bad_step_result", workflow_id="b8")
    assert driver.run_until_idle() == {"failed": 1}
    run = WorkflowRun.objects.get(pk="b8")
    assert run.status == RunStatus.FAILED
    assert run.error["type"] == "PayloadError"
    assert "result of step 'make_object'" in run.error["message"]
    assert CALLS["make_object"] == 1  # a programming error: never retried
    assert kinds("b8") == [("step", "fine")]  # no event for the bad step


def test_workflow_result_that_is_not_json_fails_the_run(
    driver: WorkflowDriver, weft_settings: Callable[..., None]
) -> None:
    weft.start("tests.echo", "a" * 300, workflow_id="b9")
    weft_settings(MAX_PAYLOAD_BYTES=320)  # the result wraps the argument: over the limit
    assert driver.run_until_idle() == {"failed": 1}
    run = WorkflowRun.objects.get(pk="b9")
    assert run.error["type"] == "PayloadError"
    assert "result of workflow 'b9'" in run.error["message"]
    assert run.result is None


def test_duplicate_workflow_id(db: None) -> None:
    weft.start("tests.echo", 1, workflow_id="b10")
    with pytest.raises(WorkflowAlreadyExistsError) as caught:
        weft.start("tests.echo", 2, workflow_id="b10")
    assert caught.value.workflow_id == "b10"
    assert WorkflowRun.objects.get(pk="b10").args == [1]
    assert WorkflowRun.objects.count() == 1


def test_duplicate_child_id_is_recorded_and_raised_on_replay(driver: WorkflowDriver) -> None:
    weft.start("tests.echo", workflow_id="taken")
    weft.start("tests.parent", "tests.child_add", 1, child_id="taken", workflow_id="b11")
    assert driver.run_until_idle()["failed"] == 1
    run = WorkflowRun.objects.get(pk="b11")
    assert run.error["type"] == "WorkflowAlreadyExistsError"
    assert kinds("b11") == [("child_start", "tests.child_add")]
    assert WorkflowRun.objects.get(pk="taken").parent_id == ""


@pytest.mark.parametrize("bad_id", ["", "x" * 256, 42, "   ", "\t\n", "a\x00b"])
def test_invalid_workflow_ids(db: None, bad_id: Any) -> None:
    with pytest.raises(ValueError, match="workflow_id"):
        weft.start("tests.echo", workflow_id=bad_id)
    _nothing_stored()


def test_child_arguments_that_are_not_json_fail_the_parent(driver: WorkflowDriver) -> None:
    weft.start("tests.parent_bad_child", workflow_id="b12")
    assert driver.run_until_idle() == {"failed": 1}
    error = WorkflowRun.objects.get(pk="b12").error
    assert error["type"] == "PayloadError"
    assert error["message"].startswith("argument 0 of child 'b12/child-0'")
    assert WorkflowRun.objects.count() == 1  # no child stored
    assert kinds("b12") == []


@pytest.mark.parametrize(
    ("start_at", "error", "message"),
    [
        ("tomorrow", TypeError, "timezone-aware datetime or None, not 'tomorrow'"),
        (1700000000, TypeError, "not 1700000000"),
        (datetime(2030, 1, 1), ValueError, "naive datetime 2030-01-01T00:00:00"),
    ],
)
def test_a_start_time_must_be_an_aware_datetime(
    db: None, start_at: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        weft.start("tests.echo", workflow_id="b-start", start_at=start_at)
    _nothing_stored()


@pytest.mark.parametrize("name", ["  ", "a\x00b"])
def test_a_signal_name_must_be_visible_and_free_of_nul(driver: WorkflowDriver, name: str) -> None:
    weft.start("tests.collect_signals", "x", 1, workflow_id="b-sig")
    driver.run_until_idle()
    with pytest.raises(ValueError, match="signal name"):
        weft.signal("b-sig", name, 1)
    assert WorkflowSignal.objects.count() == 0
