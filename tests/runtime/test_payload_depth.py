"""The nesting-depth limit of payloads (MAX_PAYLOAD_DEPTH): refused with a
PayloadError before anything is stored, the same on every database; a value
at the limit is stored and read back on every database (MariaDB's JSON_VALID
included, where weft nests it one level down in its own JSON)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

import weft_django as weft
from weft_django.api import runs as api
from weft_django.models import Claim, UpdateRequest, WorkflowEvent, WorkflowRun, WorkflowSignal
from weft_django.runtime.payload import encode
from weft_django.runtime.runs import is_duplicate_key
from weft_django.stored_json import MAX_PAYLOAD_DEPTH
from weft_django.testing import WorkflowDriver

pytestmark = pytest.mark.django_db


def nested(depth: int) -> Any:
    """A value of ``depth`` nested lists around a number (``[[1]]`` for 2)."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


DEEP = [MAX_PAYLOAD_DEPTH + 1, 40, 950, 5000]

STEP_CALLS: list[str] = []


def deep_value(depth: int) -> Any:
    STEP_CALLS.append("deep")
    return nested(depth)


@weft.workflow(name="tests.depth.waits")
def waits(ctx: weft.Context) -> Any:
    return ctx.wait_for_signal("go")


@weft.workflow(name="tests.depth.deep_step")
def deep_step(ctx: weft.Context, depth: int) -> Any:
    return ctx.step(deep_value, depth, name="deep")


@weft.workflow(name="tests.depth.deep_result")
def deep_result(ctx: weft.Context, depth: int) -> Any:
    return nested(depth)


@weft.workflow(name="tests.depth.parent")
def parent(ctx: weft.Context, depth: int) -> Any:
    return ctx.start_child("tests.depth.deep_result", nested(depth)).result()


@weft.workflow(name="tests.depth.child_of_depth")
def child_of_depth(ctx: weft.Context, depth: int) -> Any:
    return ctx.start_child("tests.depth.deep_result", depth).result()


@weft.workflow(name="tests.depth.takes_update")
def takes_update(ctx: weft.Context) -> Any:
    update = ctx.wait_for_update("set")
    update.respond(update.payload)
    return update.payload


@pytest.mark.parametrize("depth", DEEP)
def test_a_deep_signal_payload_is_refused_and_nothing_is_stored(depth: int) -> None:
    weft.start("tests.depth.waits", workflow_id="d-sig")
    with pytest.raises(weft.PayloadError, match=r"payload of signal 'go'.*nested more than 30"):
        weft.signal("d-sig", "go", nested(depth))
    assert not WorkflowSignal.objects.exists()


@pytest.mark.parametrize("depth", DEEP)
def test_deep_start_arguments_are_refused_naming_the_argument(depth: int) -> None:
    with pytest.raises(weft.PayloadError, match=r"argument 0 of workflow 'tests\.depth\."):
        weft.start("tests.depth.deep_result", nested(depth), workflow_id="d-start")
    with pytest.raises(weft.PayloadError, match="keyword argument 'depth' of workflow"):
        weft.start("tests.depth.deep_result", depth=nested(depth), workflow_id="d-start")
    assert not WorkflowRun.objects.exists()


@pytest.mark.parametrize("depth", DEEP)
def test_a_deep_update_payload_is_refused_and_nothing_is_stored(depth: int) -> None:
    weft.start("tests.depth.takes_update", workflow_id="d-upd")
    with pytest.raises(weft.PayloadError, match=r"payload of update 'set'.*nested more than 30"):
        weft.update("d-upd", "set", nested(depth), timeout=0)
    assert not UpdateRequest.objects.exists()


def test_a_step_result_too_deep_fails_the_run_once() -> None:
    """Refused by the encoder, not by the database (MariaDB's CHECK): the step ran
    once, the run failed with a PayloadError naming the step, no suspension."""
    STEP_CALLS.clear()
    weft.start("tests.depth.deep_step", 40, workflow_id="d-step")
    assert WorkflowDriver().run_until_idle() == {"failed": 1}
    assert STEP_CALLS == ["deep"]
    with pytest.raises(weft.WorkflowFailedError) as failed:
        weft.result("d-step", timeout=0)
    assert failed.value.error["type"] == "PayloadError"
    assert "result of step 'deep'" in failed.value.error["message"]
    assert not WorkflowEvent.objects.filter(run_id="d-step", kind="step").exists()


def test_a_workflow_result_too_deep_fails_the_run() -> None:
    weft.start("tests.depth.deep_result", 40, workflow_id="d-result")
    assert WorkflowDriver().run_until_idle() == {"failed": 1}
    with pytest.raises(weft.WorkflowFailedError) as failed:
        weft.result("d-result", timeout=0)
    assert "result of workflow 'd-result'" in failed.value.error["message"]


def test_deep_child_arguments_are_refused_in_the_parent() -> None:
    weft.start("tests.depth.parent", 40, workflow_id="d-parent")
    WorkflowDriver().run_until_idle()
    with pytest.raises(weft.WorkflowFailedError) as failed:
        weft.result("d-parent", timeout=0)
    assert failed.value.error["type"] == "PayloadError"
    assert "argument 0 of child" in failed.value.error["message"]
    assert list(WorkflowRun.objects.values_list("id", flat=True)) == ["d-parent"]


def test_values_at_the_limit_are_stored_and_read_back_everywhere() -> None:
    """30 levels, nested once more by weft (the argument list, the child's outcome,
    the delivered update): within what every database stores (MariaDB: 31)."""
    limit = nested(MAX_PAYLOAD_DEPTH)
    driver = WorkflowDriver()
    weft.start("tests.depth.deep_result", MAX_PAYLOAD_DEPTH, workflow_id="d-ok")
    weft.start("tests.depth.child_of_depth", MAX_PAYLOAD_DEPTH, workflow_id="d-ok-parent")
    weft.start("tests.depth.waits", workflow_id="d-ok-sig")
    weft.start("tests.depth.takes_update", workflow_id="d-ok-upd")
    weft.start("tests.echo", limit, key=limit, workflow_id="d-ok-args")
    stored = WorkflowRun.objects.values_list("args", "kwargs").get(pk="d-ok-args")
    assert stored == ([limit], {"key": limit})
    weft.purge("d-ok-args")  # its result would nest them deeper
    driver.run_until_idle()
    weft.signal("d-ok-sig", "go", limit)
    with pytest.raises(weft.UpdateTimeoutError):
        weft.update("d-ok-upd", "set", limit, timeout=0, update_id="u1")
    driver.run_until_idle()
    for run_id in ("d-ok", "d-ok-parent", "d-ok-sig", "d-ok-upd"):
        assert weft.result(run_id, timeout=0) == limit, run_id


def test_the_encoder_refuses_a_value_that_contains_itself() -> None:
    value: list[Any] = []
    value.append(value)
    with pytest.raises(weft.PayloadError, match="payload: nested more than 30"):
        encode(value, "payload")


def test_the_encoder_refuses_a_vast_value_of_shared_parts_without_walking_it() -> None:
    value: Any = [1]
    for _ in range(25):  # 2**25 items once written out
        value = [value, value]
    with pytest.raises(weft.PayloadError, match="over WEFT\\['MAX_PAYLOAD_BYTES'\\]"):
        encode(value, "payload", max_bytes=1000)


def test_only_a_unique_key_violation_is_a_duplicate() -> None:
    Claim.objects.create(workflow_id="dup")
    with pytest.raises(IntegrityError) as duplicate, transaction.atomic():
        Claim.objects.create(workflow_id="dup")
    assert is_duplicate_key(duplicate.value)
    with pytest.raises(IntegrityError) as check, transaction.atomic():
        Claim.objects.create(workflow_id="negative", epoch=-1)  # weft_claim_epoch_nonnegative
    assert not is_duplicate_key(check.value)


def test_start_reraises_an_integrity_error_that_is_not_a_duplicate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CHECK constraint refusing the row (MariaDB's JSON_VALID, were anything
    past the encoder) is not "already exists": a caller that takes that as
    success would silently lose the start."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        Claim.objects.create(workflow_id="negative", epoch=-1)

    monkeypatch.setattr(api, "insert_runs", refused)
    with pytest.raises(IntegrityError):
        weft.start("tests.depth.waits", workflow_id="d-check")


@pytest.mark.mysql
def test_mariadb_json_valid_check_is_not_a_duplicate() -> None:
    """The reproduction itself: a run whose JSON MariaDB's CHECK refuses (4025)."""
    from weft_django.runtime import registry
    from weft_django.runtime.runs import new_run

    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        new_run(registry.get("tests.depth.waits"), "d-4025", [nested(40)], {})
    assert refused.value.args[0] == 4025
    assert not is_duplicate_key(refused.value)
