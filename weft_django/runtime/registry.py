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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..exceptions import (
    WeftConfigurationError,
    WorkflowArgumentsError,
    WorkflowNotRegisteredError,
)
from ..ownership import Served

#: Stands for the ``ctx`` argument when a call is bound against a signature.
_CTX = object()


@dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    version: int
    fn: Callable[..., Any]
    timeout: float | None = None
    #: The queue its runs go to unless ``start(queue=...)`` names one (None: "default").
    queue: str | None = None

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
#: name -> version -> definition: versions of one name live side by side.
_registry: dict[str, dict[int, WorkflowDefinition]] = {}
#: :func:`served`, built once per change of the registry (the worker asks every tick).
_served: Served | None = None


def register(definition: WorkflowDefinition) -> WorkflowDefinition:
    with _lock:
        versions = _registry.setdefault(definition.name, {})
        existing = versions.get(definition.version)
        if existing is not None and _origin(existing.fn) != _origin(definition.fn):
            raise WeftConfigurationError(
                f"Workflow name {definition.name!r} version {definition.version} is "
                f"registered twice: by {_origin(existing.fn)} and by "
                f"{_origin(definition.fn)}. Give one of them another name with "
                "@workflow(name=...), or another version with @workflow(version=...)."
            )
        versions[definition.version] = definition
        _forget_served()
    return definition


def unregister(name: str, version: int | None = None) -> None:
    """Forget ``name`` (every version, or only ``version``)."""
    with _lock:
        _forget_served()
        if version is None:
            _registry.pop(name, None)
            return
        versions = _registry.get(name, {})
        versions.pop(version, None)
        if not versions:
            _registry.pop(name, None)


def _forget_served() -> None:
    global _served
    _served = None


def _origin(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def workflow(
    name: str | None = None,
    version: int = 1,
    *,
    timeout: float | timedelta | None = None,
    queue: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ctx, *args, **kwargs)`` as a workflow.

    ``name`` defaults to ``"module.qualname"``. ``version`` (a positive int)
    lets versions of one name be registered side by side: ``start(name)``
    starts the highest, each run is replayed with its own version's code, and a
    worker claims only runs of the versions it has (docs/deploying-code.md).
    ``timeout`` is an optional execution timeout from the run's start; past it
    the run is ``timed_out``. ``queue`` is the queue its runs go to by default
    (docs/flow-control.md); it must be ``"default"`` or in ``WEFT["QUEUES"]``
    when a run is started.
    """
    if callable(name):
        raise TypeError("use @workflow() or @workflow(name=...), with parentheses")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise WeftConfigurationError(f"workflow version must be a positive int, not {version!r}")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if seconds is not None and seconds <= 0:
        raise WeftConfigurationError(f"workflow timeout must be positive, not {timeout!r}")
    if queue is not None and (not isinstance(queue, str) or not 0 < len(queue) <= 64):
        raise WeftConfigurationError(f"workflow queue must be a queue name, not {queue!r}")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        definition = WorkflowDefinition(
            name=name or _origin(fn), version=version, fn=fn, timeout=seconds, queue=queue
        )
        register(definition)
        # Marks the user's function so resolve() finds it (functions take attributes).
        fn._weft_definition = definition  # type: ignore[attr-defined]
        return fn

    return decorate


def get(name: str, version: int | None = None) -> WorkflowDefinition:
    """The definition of ``name``: the highest version registered in this
    process, or ``version`` (``WorkflowNotRegisteredError`` when it is not)."""
    versions = _registry.get(name)
    if not versions:
        raise WorkflowNotRegisteredError(name)
    if version is None:
        return versions[max(versions)]
    try:
        return versions[version]
    except KeyError:
        raise WorkflowNotRegisteredError(name, version) from None


def is_registered(name: str, version: int | None = None) -> bool:
    """Whether ``name`` (in ``version``, when given) is registered here."""
    versions = _registry.get(name)
    return bool(versions) and (version is None or version in versions)  # type: ignore[operator]


def registered_names() -> list[str]:
    return sorted(name for name, versions in _registry.items() if versions)


def registered_versions() -> dict[str, list[int]]:
    """name -> the versions of it registered in this process, ascending."""
    return {name: sorted(versions) for name, versions in sorted(_registry.items()) if versions}


def served_summary() -> str:
    """The workflows registered here, for a worker's start line: ``a, b v1/v2``
    (the versions shown when a name has another than 1)."""
    text = [
        name if found == [1] else f"{name} " + "/".join(f"v{version}" for version in found)
        for name, found in registered_versions().items()
    ]
    return ", ".join(text) or "(none registered)"


def served() -> Served:
    """The names registered here with their versions: what this process's
    engines claim (a collection of names the ownership queries take)."""
    global _served
    found = _served
    if found is None:
        found = _served = Served.of(registered_versions(), queues=_queues)
    return found


#: The queues this process's worker serves (None: all), ``weft_worker --queue``.
_queues: frozenset[str] | None = None


def serve_queues(queues: Iterable[str] | None) -> None:
    """Claim new runs of these flow-control queues only (None: of every queue)."""
    global _queues
    with _lock:
        _queues = frozenset(queues) if queues is not None else None
        _forget_served()


def resolve(
    workflow: str | Callable[..., Any] | WorkflowDefinition, version: int | None = None
) -> WorkflowDefinition:
    """A registered name, a decorated function, or a definition -> its definition.

    A name resolves to its highest registered version unless ``version`` is
    given; a decorated function or a definition to its own version (or
    ``version``)."""
    if isinstance(workflow, str):
        return get(workflow, version)
    definition = workflow if isinstance(workflow, WorkflowDefinition) else None
    if definition is None:
        found = getattr(workflow, "_weft_definition", None)
        definition = found if isinstance(found, WorkflowDefinition) else None
    if definition is None:
        raise WorkflowNotRegisteredError(repr(workflow))
    return get(definition.name, definition.version if version is None else version)
