"""The workflow registry: ``@workflow`` and name lookup.

Names are resolved only against what was registered; a dotted path given as
input is never imported. ``AppConfig.ready()`` autodiscovers the
``workflows`` module of every installed app, so every process (web, worker,
Celery) knows the same names.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..exceptions import (
    WeftConfigurationError,
    WorkflowArgumentsError,
    WorkflowNotRegisteredError,
)

#: Stands for the ``ctx`` argument when a call is bound against a signature.
_CTX = object()


@dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    version: int
    fn: Callable[..., Any]
    timeout: float | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def check_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``WorkflowArgumentsError`` unless ``fn(ctx, *args, **kwargs)`` binds.

        The call is bound as the engine makes it, a placeholder in ``ctx``'s place.
        A function whose signature cannot be read (some builtins) is not checked.
        """
        signature = _signature(self.fn)
        if signature is None:
            return
        try:
            signature.bind(_CTX, *args, **kwargs)
        except TypeError as exc:
            raise WorkflowArgumentsError(self.name, str(exc)) from None


@functools.lru_cache(maxsize=1024)
def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    """``fn``'s signature, read once (None when it cannot be read): a start binds
    its arguments against it every time."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


_lock = threading.Lock()
_registry: dict[str, WorkflowDefinition] = {}


def register(definition: WorkflowDefinition) -> WorkflowDefinition:
    with _lock:
        existing = _registry.get(definition.name)
        if existing is not None and _origin(existing.fn) != _origin(definition.fn):
            raise WeftConfigurationError(
                f"Workflow name {definition.name!r} is registered twice: by "
                f"{_origin(existing.fn)} and by {_origin(definition.fn)}. Give one of them "
                "another name with @workflow(name=...)."
            )
        _registry[definition.name] = definition
    return definition


def unregister(name: str) -> None:
    with _lock:
        _registry.pop(name, None)


def _origin(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def workflow(
    name: str | None = None,
    version: int = 1,
    *,
    timeout: float | timedelta | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ctx, *args, **kwargs)`` as a workflow.

    ``name`` defaults to ``"module.qualname"``. ``timeout`` is an optional
    execution timeout from the run's start; past it the run is ``timed_out``.
    """
    if callable(name):
        raise TypeError("use @workflow() or @workflow(name=...), with parentheses")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise WeftConfigurationError(f"workflow version must be a positive int, not {version!r}")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if seconds is not None and seconds <= 0:
        raise WeftConfigurationError(f"workflow timeout must be positive, not {timeout!r}")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        definition = WorkflowDefinition(
            name=name or _origin(fn), version=version, fn=fn, timeout=seconds
        )
        register(definition)
        # Marks the user's function so resolve() finds it (functions take attributes).
        fn._weft_definition = definition  # type: ignore[attr-defined]
        return fn

    return decorate


def get(name: str) -> WorkflowDefinition:
    try:
        return _registry[name]
    except KeyError:
        raise WorkflowNotRegisteredError(name) from None


def is_registered(name: str) -> bool:
    return name in _registry


def registered_names() -> list[str]:
    return sorted(_registry)


def resolve(workflow: str | Callable[..., Any] | WorkflowDefinition) -> WorkflowDefinition:
    """A registered name, a decorated function, or a definition -> its definition."""
    if isinstance(workflow, WorkflowDefinition):
        return get(workflow.name)
    if isinstance(workflow, str):
        return get(workflow)
    definition = getattr(workflow, "_weft_definition", None)
    if isinstance(definition, WorkflowDefinition):
        return get(definition.name)
    raise WorkflowNotRegisteredError(repr(workflow))
