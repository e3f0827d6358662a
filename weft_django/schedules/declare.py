"""Declaring schedules: ``@weft.schedule(...)`` on a workflow or a Tasks-API
task, and ``WEFT["SCHEDULES"]`` in settings (docs/schedules.md).

A declaration names its workflow by the function (the decorator) or by its
REGISTERED name (settings); a dotted import path is never imported. The
decorator may go above or below ``@weft.workflow``: the workflow's name is
looked up when the schedule is first used, not when it is declared.

A schedule of a ``django.tasks`` task (Django >= 6.0, ``WeftTaskBackend``)
starts, at each tick, a run of the built-in workflow ``django.tasks.<queue>``
with the arguments ``WeftTaskBackend.enqueue()`` stores: the task's module
path, its backend alias, its args and kwargs. The worker that runs it resolves
the task by the backend's allow-list (:meth:`WeftTaskBackend.resolve`), as for
any enqueued task. In settings a task is named by that module path
(``"task": "shop.background.send_receipt"``), resolved by the same rule
through :func:`set_task_resolver` (installed by :mod:`weft_django.backends`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..conf import raw_settings
from ..exceptions import WeftConfigurationError, WeftError
from .cron import Cron, CronError

CATCH_UP = ("skip", "latest", "all")
OVERLAP = ("allow", "skip", "queue")
#: The most missed ticks ``catch_up="all"`` fires by default after an outage.
MAX_CATCH_UP = 100
#: A schedule's name: it goes into run ids and URLs.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$")
SETTING_KEYS = frozenset(
    {
        "workflow",
        "task",
        "cron",
        "timezone",
        "args",
        "kwargs",
        "catch_up",
        "overlap",
        "max_catch_up",
    }
)
#: A task's runs are runs of this built-in workflow (``weft_django.backends``).
TASK_WORKFLOW = "django.tasks.{queue}"
#: A task's route: (its module path, its task backend's alias, its queue).
TaskRoute = tuple[str, str, str]
_task_resolver: Callable[[str], TaskRoute] | None = None


def set_task_resolver(resolver: Callable[[str], TaskRoute] | None) -> None:
    """Install how a task named by module path in ``WEFT["SCHEDULES"]`` is
    resolved (``weft_django.backends`` installs the backend's allow-list rule)."""
    global _task_resolver
    _task_resolver = resolver


def is_task(target: Any) -> bool:
    """A ``django.tasks.Task`` (Django >= 6.0)."""
    try:
        from django.tasks import Task
    except ImportError:
        return False
    return isinstance(target, Task)


@dataclass(frozen=True)
class ScheduleSpec:
    """One declared schedule. ``workflow`` is a registered name or the decorated
    function (its registered name is read when the spec is used); a task's
    schedule has ``task`` instead (the ``django.tasks.Task``, or its module
    path from settings) and an empty ``workflow``."""

    name: str
    workflow: str | Callable[..., Any]
    cron: str
    timezone: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    catch_up: str = "latest"
    overlap: str = "allow"
    max_catch_up: int = MAX_CATCH_UP
    source: str = "code"
    task: Any = None

    @property
    def target(self) -> Any:
        """What the schedule fires: the task, or else the workflow."""
        return self.workflow if self.task is None else self.task

    @property
    def task_path(self) -> str | None:
        """A task's module path (None for a workflow's schedule)."""
        if self.task is None or isinstance(self.task, str):
            return self.task
        return str(self.task.module_path)

    def task_route(self) -> TaskRoute | None:
        """A task's (module path, backend alias, queue); None for a workflow.
        ``WeftConfigurationError`` (or the backend's ``TaskNotAllowedError``)
        when a task named in settings cannot be resolved."""
        if self.task is None:
            return None
        if not isinstance(self.task, str):
            return (str(self.task.module_path), str(self.task.backend), str(self.task.queue_name))
        resolver = _task_resolver
        if resolver is None:
            raise WeftConfigurationError(
                f"Schedule {self.name!r} fires task {self.task!r}, but no WeftTaskBackend "
                "is configured in TASKS (Django >= 6.0; docs/tasks.md)."
            )
        return resolver(self.task)

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        """The workflow a tick starts and its arguments. A task's: the built-in
        ``django.tasks.<queue>`` with the arguments ``WeftTaskBackend.enqueue()``
        stores (module path, backend alias, args, kwargs)."""
        route = self.task_route()
        if route is None:
            return self.workflow_name, self.args, dict(self.kwargs)
        path, alias, queue = route
        call_args = (path, alias, list(self.args), dict(self.kwargs))
        return TASK_WORKFLOW.format(queue=queue), call_args, {}

    @property
    def workflow_name(self) -> str:
        """The registered name of the workflow (``?module.qualname`` while the
        function is not registered; ``?task <path>`` while a task named in
        settings cannot be resolved)."""
        if self.task is not None:
            try:
                return self.call()[0]
            except WeftError:
                return f"?task {self.task}"
        if isinstance(self.workflow, str):
            return self.workflow
        definition = getattr(self.workflow, "_weft_definition", None)
        if definition is not None:
            return str(definition.name)
        fn = self.workflow
        return f"?{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"

    def parsed(self) -> Cron:
        return Cron(self.cron, self.timezone)

    def problems(self) -> list[str]:
        """What is wrong with this declaration (empty when nothing)."""
        found = []
        try:
            self.parsed()
        except CronError as exc:
            found.append(str(exc))
        if self.catch_up not in CATCH_UP:
            found.append(f"catch_up is {self.catch_up!r}; use one of {', '.join(CATCH_UP)}")
        if self.overlap not in OVERLAP:
            found.append(f"overlap is {self.overlap!r}; use one of {', '.join(OVERLAP)}")
        limit = self.max_catch_up
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            found.append(f"max_catch_up must be an integer from 1 to 10000, not {limit!r}")
        return found


_lock = threading.Lock()
_declared: dict[str, ScheduleSpec] = {}


def schedule(
    cron: str,
    *,
    timezone: str | None = None,
    name: str | None = None,
    args: tuple[Any, ...] | list[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    catch_up: str = "latest",
    overlap: str = "allow",
    max_catch_up: int = MAX_CATCH_UP,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Fire a workflow (or a Tasks-API task) on a cron schedule, exactly once per
    tick, from any worker.

    Stack it with ``@weft.workflow`` in either order, or above Django's
    ``@task`` (Django >= 6.0, ``WeftTaskBackend``): each tick then enqueues the
    task through weft (docs/schedules.md). ``cron`` has five fields
    (or six, seconds first); ``timezone`` is an IANA name (default UTC);
    ``name`` (default: the function's ``module.qualname``) is unique, 1 to 200
    letters, digits, ``_``, ``.`` or ``-``. Each tick starts the run
    ``schedule:<name>:<UTC ISO time>`` with ``args`` and ``kwargs``.
    ``catch_up`` (``skip``, ``latest``, ``all``; ``all`` fires at most
    ``max_catch_up`` missed ticks) says what an outage's missed ticks do, and
    ``overlap`` (``allow``, ``skip``, ``queue``) what a tick does while the
    previous run is unfinished (docs/schedules.md). A bad expression, time zone
    or policy is a system check error (``weft.E030``) and stops ``weft_worker``
    from starting; a name declared twice raises ``WeftConfigurationError``.
    A task the backend would not run is ``weft.E034``.
    """
    if callable(cron) or is_task(cron):
        raise TypeError('use @weft.schedule("cron expression", ...), with the expression')

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        task = fn if is_task(fn) else None
        if task is not None:
            default_name = str(getattr(task, "module_path", ""))
        else:
            default_name = f"{fn.__module__}.{fn.__qualname__}"
        spec = ScheduleSpec(
            name=name or default_name,
            workflow="" if task is not None else fn,
            task=task,
            cron=cron,
            timezone=timezone,
            args=tuple(args),
            kwargs=dict(kwargs or {}),
            catch_up=catch_up,
            overlap=overlap,
            max_catch_up=max_catch_up,
        )
        declare(spec)
        return fn

    return decorate


def declare(spec: ScheduleSpec) -> ScheduleSpec:
    """Register a schedule declared in code. What is wrong with it is reported
    by the system checks (and refuses a worker's start), not raised here; a name
    declared twice raises ``WeftConfigurationError``."""
    with _lock:
        existing = _declared.get(spec.name)
        if existing is not None and existing.target is not spec.target:
            raise WeftConfigurationError(
                f"Schedule name {spec.name!r} is declared twice; give one of them "
                "another name with @weft.schedule(..., name=...)."
            )
        _declared[spec.name] = spec
    return spec


def undeclare(name: str) -> None:
    """Forget a schedule declared in code (tests)."""
    with _lock:
        _declared.pop(name, None)


#: The system check ids (docs/schedules.md): a bad declaration (expression, time
#: zone, policy, name); ``WEFT["SCHEDULES"]`` malformed; an unknown workflow; the
#: arguments do not fit the workflow (or task); a task the backend would not run.
BAD_DECLARATION, BAD_SETTING, UNKNOWN_WORKFLOW, BAD_ARGUMENTS, BAD_TASK = (
    "weft.E030",
    "weft.E031",
    "weft.E032",
    "weft.E033",
    "weft.E034",
)


def settings_specs(raw: Any = None) -> tuple[list[ScheduleSpec], list[tuple[str, str]]]:
    """The schedules of ``WEFT["SCHEDULES"]`` and what is wrong with them
    (``(check id, message)`` pairs)."""
    if raw is None:
        try:
            raw = raw_settings().get("SCHEDULES")
        except WeftConfigurationError:
            return [], []  # WEFT itself is not a dict: weft.E001 says so
    value = raw
    if value is None:
        return [], []
    if not isinstance(value, Mapping):
        problem = f"WEFT['SCHEDULES'] must be a dict of name -> schedule, not {value!r}"
        return [], [(BAD_SETTING, problem)]
    specs: list[ScheduleSpec] = []
    problems: list[tuple[str, str]] = []
    for name, entry in value.items():
        where = f"WEFT['SCHEDULES'][{name!r}]"
        if not isinstance(name, str) or not NAME.match(name):
            problems.append(
                (BAD_SETTING, f"{where}: a name is 1 to 200 letters, digits, '_', '.' or '-'")
            )
            continue
        if not isinstance(entry, Mapping):
            problems.append((BAD_SETTING, f"{where} must be a dict with 'workflow' and 'cron'"))
            continue
        unknown = sorted(str(key) for key in entry if key not in SETTING_KEYS)
        target = "task" if "task" in entry else "workflow"
        missing = [key for key in (target, "cron") if not isinstance(entry.get(key), str)]
        what = ([f"unknown key(s) {', '.join(unknown)}"] if unknown else []) + (
            [f"needs a string {' and '.join(missing)}"] if missing else []
        )
        if "task" in entry and "workflow" in entry:
            what.append("give a workflow or a task, not both")
        if what:
            problems.append((BAD_SETTING, f"{where}: {'; '.join(what)}"))
            continue
        args, kwargs = entry.get("args", ()), entry.get("kwargs", {})
        if not isinstance(args, (list, tuple)) or not isinstance(kwargs, Mapping):
            problems.append((BAD_SETTING, f"{where}: args must be a list and kwargs a dict"))
            continue
        spec = ScheduleSpec(
            name=name,
            workflow=entry.get("workflow", ""),
            task=entry.get("task"),
            cron=entry["cron"],
            timezone=entry.get("timezone"),
            args=tuple(args),
            kwargs=dict(kwargs),
            catch_up=entry.get("catch_up", "latest"),
            overlap=entry.get("overlap", "allow"),
            max_catch_up=entry.get("max_catch_up", MAX_CATCH_UP),
            source="settings",
        )
        bad = spec.problems()
        if bad:
            problems.append((BAD_DECLARATION, f"{where}: {'; '.join(bad)}"))
            continue
        specs.append(spec)
    return specs, problems


def code_problems() -> list[str]:
    """What is wrong with the schedules declared in code."""
    with _lock:
        specs = list(_declared.values())
    found = []
    for spec in specs:
        problems = spec.problems()
        if not NAME.match(spec.name):
            problems.insert(0, "its name must be 1 to 200 letters, digits, '_', '.' or '-'")
        if problems:
            found.append(f"@weft.schedule {spec.name!r}: {'; '.join(problems)}")
    return found


def declared() -> dict[str, ScheduleSpec]:
    """Every schedule by name: code's, then settings' (``WeftConfigurationError``
    when one is bad or a name is declared in both)."""
    specs, problems = settings_specs()
    first = (code_problems() + [text for _, text in problems])[:1]
    if first:
        raise WeftConfigurationError(f"{first[0]}.")
    with _lock:
        found = dict(_declared)
    for spec in specs:
        if spec.name in found:
            raise WeftConfigurationError(
                f"Schedule name {spec.name!r} is declared in code and in WEFT['SCHEDULES']."
            )
        found[spec.name] = spec
    return found
