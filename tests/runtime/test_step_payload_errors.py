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
