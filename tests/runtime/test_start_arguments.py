"""``start`` and ``ctx.start_child`` bind their arguments against the workflow
function's signature (``ctx`` left out): arguments it cannot take raise
``WorkflowArgumentsError`` at once and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest

import weft_django as weft
from weft_django import WorkflowArgumentsError, WorkflowNotRegisteredError
from weft_django.models import WorkflowEvent, WorkflowRun
from weft_django.runtime import registry
from weft_django.testing import WorkflowDriver

from . import workflows
from .conftest import kinds


@pytest.mark.parametrize(
    ("args", "kwargs", "reason"),
    [
        ((1, 2, 3), {}, "too many positional arguments"),
        ((), {}, "missing a required argument: 'value'"),
        ((1,), {"colour": "red"}, "got an unexpected keyword argument 'colour'"),
        ((), {"value": 1, "ctx": None}, "multiple values for argument 'ctx'"),
        ((1,), {"value": 2}, "multiple values for argument 'value'"),
    ],
)
def test_start_refuses_arguments_the_workflow_cannot_take(
    db: None, args: tuple[Any, ...], kwargs: dict[str, Any], reason: str
) -> None:
    with pytest.raises(WorkflowArgumentsError) as caught:
        weft.start("tests.child_add", *args, workflow_id="bad-args", **kwargs)
    assert caught.value.name == "tests.child_add"
    assert caught.value.reason == reason
    assert str(caught.value) == (
        f"Workflow 'tests.child_add' cannot take these arguments: {reason}."
    )
    assert isinstance(caught.value, TypeError)  # what calling the function would raise
    assert isinstance(caught.value, weft.WeftError)
    assert not WorkflowRun.objects.exists()  # nothing stored


def test_arguments_that_fit_are_stored_as_given(db: None) -> None:
    weft.start("tests.child_add", 4, workflow_id="fits")
    weft.start("tests.child_add", value=5, workflow_id="fits-kw")
    weft.start(workflows.child_add, 6, workflow_id="fits-fn")  # the decorated function
    weft.start("tests.echo", 1, 2, 3, workflow_id="fits-var", anything="goes")
    weft.start("tests.steps", workflow_id="fits-default")  # a default fills ``count``
    stored = dict(WorkflowRun.objects.values_list("pk", "args"))
    assert stored == {
        "fits": [4],
        "fits-kw": [],
        "fits-fn": [6],
        "fits-var": [1, 2, 3],
        "fits-default": [],
    }


def test_arguments_are_checked_before_they_are_encoded(db: None) -> None:
    """A call that cannot bind fails as such, even when a value is not JSON either."""
    with pytest.raises(WorkflowArgumentsError, match="too many positional"):
        weft.start("tests.child_add", 1, object())
    assert not WorkflowRun.objects.exists()


def test_an_unreadable_signature_is_not_checked(db: None) -> None:
    """A function whose signature cannot be read is started as before."""
    definition = registry.WorkflowDefinition(name="tests.builtin_fn", version=1, fn=print)
    registry.register(definition)
    try:
        weft.start("tests.builtin_fn", 1, 2, workflow_id="builtin")
    finally:
        registry.unregister("tests.builtin_fn")
    assert WorkflowRun.objects.get(pk="builtin").args == [1, 2]


def test_a_workflow_not_registered_here_is_refused_as_before(db: None) -> None:
    with pytest.raises(WorkflowNotRegisteredError):
        weft.start("tests.nowhere", 1, 2, 3)
    assert not WorkflowRun.objects.exists()


def test_a_child_with_arguments_it_cannot_take_fails_the_parent_not_the_child(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.parent", "tests.child_add", 1, 2, 3, workflow_id="pa1")
    assert driver.run_until_idle() == {"failed": 1}
    error = WorkflowRun.objects.get(pk="pa1").error
    assert error["type"] == "WorkflowArgumentsError"
    assert error["message"] == (
        "Workflow 'tests.child_add' cannot take these arguments: too many positional arguments."
    )
    assert list(WorkflowRun.objects.values_list("pk", flat=True)) == ["pa1"]  # no child
    assert kinds("pa1") == []  # no child_start recorded


def test_a_parent_can_catch_the_error_and_start_a_child_that_fits(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.parent_catches_bad_arguments", workflow_id="pa2")
    assert driver.run_until_idle()["completed"] == 2
    assert weft.result("pa2", timeout=0) == {
        "refused": "Workflow 'tests.child_add' cannot take these arguments: "
        "too many positional arguments.",
        "child": "pa2/child-0",  # the refused start took no place in history
        "result": 103,
    }
    assert WorkflowEvent.objects.filter(run_id="pa2", kind="child_start").count() == 1
