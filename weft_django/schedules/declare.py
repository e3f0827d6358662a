"""Declaring schedules: ``@weft.schedule(...)`` on a workflow, and
``WEFT["SCHEDULES"]`` in settings (docs/schedules.md).

A declaration names its workflow by the function (the decorator) or by its
REGISTERED name (settings); a dotted import path is never imported. The
decorator may go above or below ``@weft.workflow``: the workflow's name is
looked up when the schedule is first used, not when it is declared.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..conf import raw_settings
from ..exceptions import WeftConfigurationError
from .cron import Cron, CronError

CATCH_UP = ("skip", "latest", "all")
OVERLAP = ("allow", "skip", "queue")
#: The most missed ticks ``catch_up="all"`` fires by default after an outage.
MAX_CATCH_UP = 100
#: A schedule's name: it goes into run ids and URLs.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$")
SETTING_KEYS = frozenset(
    {"workflow", "cron", "timezone", "args", "kwargs", "catch_up", "overlap", "max_catch_up"}
)


@dataclass(frozen=True)
class ScheduleSpec:
    """One declared schedule. ``workflow`` is a registered name or the decorated
    function (its registered name is read when the spec is used)."""

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

    @property
    def workflow_name(self) -> str:
        """The registered name of the workflow (``?module.qualname`` while the
        function is not registered)."""
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
    """Fire a workflow on a cron schedule, exactly once per tick, from any worker.

    Stack it with ``@weft.workflow`` in either order. ``cron`` has five fields
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
    """
    if callable(cron):
        raise TypeError('use @weft.schedule("cron expression", ...), with the expression')

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        spec = ScheduleSpec(
            name=name or f"{fn.__module__}.{fn.__qualname__}",
            workflow=fn,
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
        if existing is not None and existing.workflow is not spec.workflow:
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
#: arguments do not fit the workflow.
BAD_DECLARATION, BAD_SETTING, UNKNOWN_WORKFLOW, BAD_ARGUMENTS = (
    "weft.E030",
    "weft.E031",
    "weft.E032",
    "weft.E033",
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
        missing = [key for key in ("workflow", "cron") if not isinstance(entry.get(key), str)]
        if unknown or missing:
            what = ([f"unknown key(s) {', '.join(unknown)}"] if unknown else []) + (
                [f"needs a string {' and '.join(missing)}"] if missing else []
            )
            problems.append((BAD_SETTING, f"{where}: {'; '.join(what)}"))
            continue
        args, kwargs = entry.get("args", ()), entry.get("kwargs", {})
        if not isinstance(args, (list, tuple)) or not isinstance(kwargs, Mapping):
            problems.append((BAD_SETTING, f"{where}: args must be a list and kwargs a dict"))
            continue
        spec = ScheduleSpec(
            name=name,
            workflow=entry["workflow"],
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
