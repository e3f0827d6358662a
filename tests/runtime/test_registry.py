"""@workflow registration and name resolution."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import weft_django as weft
from weft_django import WorkflowNotRegisteredError
from weft_django.exceptions import WeftConfigurationError
from weft_django.models import WorkflowRun
from weft_django.runtime import registry
from weft_django.runtime.registry import WorkflowDefinition

from . import workflows


@pytest.fixture
def scratch_names() -> Iterator[list[str]]:
    """Names registered by a test are unregistered after it."""
    names: list[str] = []
    yield names
    for name in names:
        registry.unregister(name)


def test_registered_workflows_resolve_by_name_function_and_definition() -> None:
    definition = registry.get("tests.echo")
    assert definition.fn is workflows.echo
    assert definition.version == 1
    assert definition.timeout is None
    assert registry.resolve("tests.echo") is definition
    assert registry.resolve(workflows.echo) is definition
    assert registry.resolve(definition) is definition
    assert workflows.echo._weft_definition is definition
    assert registry.is_registered("tests.echo")
    assert "tests.echo" in registry.registered_names()
    assert registry.get("tests.with_timeout").timeout == 60.0


def test_decorator_returns_the_function_unchanged(scratch_names: list[str]) -> None:
    def fn(ctx: Any, x: int) -> int:
        return x * 2

    scratch_names.append("tests.scratch.plain")
    decorated = weft.workflow(name="tests.scratch.plain")(fn)
    assert decorated is fn
    assert fn(None, 4) == 8


def test_name_defaults_to_module_and_qualname(scratch_names: list[str]) -> None:
    @weft.workflow()
    def defaulted(ctx: Any) -> None:
        return None

    expected = f"{__name__}.test_name_defaults_to_module_and_qualname.<locals>.defaulted"
    scratch_names.append(expected)
    assert registry.get(expected).fn is defaulted


def test_duplicate_name_from_another_function(scratch_names: list[str]) -> None:
    scratch_names.append("tests.scratch.dup")

    @weft.workflow(name="tests.scratch.dup")
    def first(ctx: Any) -> str:
        return "first"

    def second(ctx: Any) -> str:
        return "second"

    with pytest.raises(WeftConfigurationError) as caught:
        weft.workflow(name="tests.scratch.dup")(second)
    assert "tests.scratch.dup" in str(caught.value)
    assert "first" in str(caught.value) and "second" in str(caught.value)
    assert registry.get("tests.scratch.dup").fn is first
    with pytest.raises(WeftConfigurationError):
        weft.workflow(name="tests.echo")(second)
    assert registry.get("tests.echo").fn is workflows.echo


def test_re_registering_the_same_function_is_allowed(scratch_names: list[str]) -> None:
    # A module imported twice (autodiscovery, reload) registers the same function again.
    definition = registry.get("tests.echo")
    again = WorkflowDefinition("tests.echo", 1, workflows.echo)
    assert registry.register(again) is again
    registry.register(definition)
    assert registry.get("tests.echo") is definition


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"version": 0}, WeftConfigurationError),
        ({"version": True}, WeftConfigurationError),
        ({"version": "2"}, WeftConfigurationError),
        ({"timeout": 0}, WeftConfigurationError),
        ({"timeout": -5}, WeftConfigurationError),
    ],
)
def test_invalid_decorator_arguments(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        weft.workflow(name="tests.scratch.invalid", **kwargs)
    assert not registry.is_registered("tests.scratch.invalid")


def test_decorator_without_parentheses_is_refused() -> None:
    def fn(ctx: Any) -> None:
        return None

    with pytest.raises(TypeError, match="parentheses"):
        weft.workflow(fn)  # type: ignore[arg-type]


def test_unknown_names() -> None:
    with pytest.raises(WorkflowNotRegisteredError) as caught:
        registry.get("tests.unknown")
    assert caught.value.name == "tests.unknown"
    with pytest.raises(WorkflowNotRegisteredError):
        registry.resolve(42)  # type: ignore[arg-type]
    assert isinstance(WorkflowNotRegisteredError("x"), LookupError)


def test_unregistered_workflow_is_not_driven(db: None, driver: Any) -> None:
    weft.start("tests.echo", workflow_id="rg1")
    definition = registry.get("tests.echo")
    registry.unregister("tests.echo")
    try:
        outcomes = driver.run_until_idle()
    finally:
        registry.register(definition)
    assert outcomes == {"not_eligible": 1}
    assert weft.describe("rg1").status == "pending"
    assert weft.describe("rg1").owner_engine_id is None  # released, not stranded
    driver.run_until_idle()
    assert weft.result("rg1", timeout=0) == {"args": [], "kwargs": {}}


def test_versions_and_timeouts_are_stored_on_the_run(db: None, scratch_names: list[str]) -> None:
    scratch_names.append("tests.scratch.v3")

    @weft.workflow(name="tests.scratch.v3", version=3, timeout=90)
    def v3(ctx: Any) -> None:
        return None

    weft.start(v3, workflow_id="rg2")
    described = weft.describe("rg2")
    assert described.workflow_version == 3
    run = WorkflowRun.objects.get(pk="rg2")
    assert (run.timeout_at - run.created_at).total_seconds() == 90
