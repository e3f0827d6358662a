"""A PayloadError *raised by* a step function is a step failure like any other;
only a non-JSON *result* is a programming error that is never recorded."""

from __future__ import annotations

import pytest

import weft_django as weft
from weft_django import RetryPolicy
from weft_django.models import WorkflowEvent
from weft_django.testing import WorkflowDriver

CALLS: list[int] = []


def bad_signal() -> None:
    CALLS.append(1)
    weft.signal("nowhere", "x", object())  # raises PayloadError before any lookup


@weft.workflow(name="tests.step_raises_payload_error")
def step_raises_payload_error(ctx: weft.Context) -> str:
    try:
        ctx.step(bad_signal, retry=RetryPolicy(max_attempts=2, initial_interval=0))
    except weft.StepFailedError as exc:
        return exc.error_type
    return "no error"


@pytest.mark.django_db
def test_payload_error_from_inside_a_step_is_retried_and_recorded() -> None:
    CALLS.clear()
    driver = WorkflowDriver()
    weft.start("tests.step_raises_payload_error", workflow_id="pe-1")
    driver.run_until_idle()
    assert weft.result("pe-1", timeout=0) == "PayloadError"
    assert len(CALLS) == 2
    event = WorkflowEvent.objects.get(run_id="pe-1", kind="step")
    assert event.error["type"] == "PayloadError" and event.error["attempts"] == 2


NUL_CALLS: list[int] = []


def returns_nul() -> str:
    NUL_CALLS.append(1)
    return "before\x00after"  # PostgreSQL's jsonb refuses NUL


@weft.workflow(name="tests.step_returns_nul")
def step_returns_nul(ctx: weft.Context) -> str:
    return ctx.step(returns_nul)


@pytest.mark.django_db
def test_a_result_the_database_would_refuse_fails_the_run_once_instead_of_looping() -> None:
    """Refused by the encoder, not by the database: the side effect runs once and the
    run fails with a PayloadError naming the step, instead of a checkpoint that fails
    on every retry."""
    NUL_CALLS.clear()
    driver = WorkflowDriver()
    weft.start("tests.step_returns_nul", workflow_id="pe-nul")
    assert driver.run_until_idle() == {"failed": 1}
    assert len(NUL_CALLS) == 1
    with pytest.raises(weft.WorkflowFailedError) as failed:
        weft.result("pe-nul", timeout=0)
    assert failed.value.error["type"] == "PayloadError"
    assert "result of step" in failed.value.error["message"]
    assert "NUL" in failed.value.error["message"]


@pytest.mark.parametrize("payload", ["a\x00b", {"k\x00": 1}, "\ud800", ["x\udfff"]])
@pytest.mark.django_db
def test_unstorable_text_is_refused_before_anything_is_stored(payload: object) -> None:
    weft.start("tests.step_returns_nul", workflow_id="pe-sig")
    with pytest.raises(weft.PayloadError, match="cannot store"):
        weft.signal("pe-sig", "s", payload)
    with pytest.raises(weft.PayloadError, match="cannot store"):
        weft.start("tests.echo", payload, workflow_id="pe-arg")
    assert not weft.get_handle("pe-sig").describe().pending_signals


@pytest.mark.parametrize("payload", ["\\u0000 as text", "\U0001f600", "caf\u00e9"])
@pytest.mark.django_db
def test_escapes_and_characters_that_look_alike_are_fine(payload: str) -> None:
    weft.start("tests.step_returns_nul", workflow_id="pe-ok")
    weft.signal("pe-ok", "s", payload)
    assert weft.get_handle("pe-ok").describe().pending_signals == 1
