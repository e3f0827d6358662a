"""``WEFT["QUEUES"]``: each queue's limits, validated (``weft.E040``-``E045``).

A queue is named by 1 to 64 characters of letters, digits and ``_ . : -``.
Its options, all optional::

    WEFT = {"QUEUES": {"payments": {
        "concurrency": 10,          # turns of the queue's runs at once, all workers
        "per_key_concurrency": 1,   # ... per concurrency_key
        "rate": "20/s",             # turns started per second ("N/s", "N/m", "N/h" or a number)
        "burst": 20,                # how many may come at once (default: a second's worth)
        "per_key_rate": "1/s",      # ... per concurrency_key
        "per_key_burst": 1,
    }}}

The queue ``"default"`` always exists (limits only when listed); any other
queue a run names must be listed (:class:`~weft_django.exceptions.FlowControlError`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..conf import GLOBAL_LEASE, WORKFLOW_LEASE, Problem, raw_settings
from ..exceptions import FlowControlError, WeftConfigurationError

#: The queue of runs that name none (Django Tasks' default ``queue_name`` too).
DEFAULT_QUEUE = "default"
QUEUE_NAME_MAX = 64
KEY_MAX = 128
PRIORITY_MIN, PRIORITY_MAX = -100, 100
#: The largest concurrency limit (slot rows are pre-numbered).
MAX_CONCURRENCY = 10_000
OPTIONS = ("concurrency", "per_key_concurrency", "rate", "burst", "per_key_rate", "per_key_burst")
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$")
_UNIT = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}


@dataclass(frozen=True)
class QueueLimits:
    """One queue's limits (None: not limited that way)."""

    name: str
    concurrency: int | None = None
    per_key_concurrency: int | None = None
    rate: float | None = None  # turns per second
    burst: int = 1
    per_key_rate: float | None = None
    per_key_burst: int = 1

    @property
    def limited(self) -> bool:
        """Whether a turn of this queue passes the gate at all."""
        return any(
            value is not None
            for value in (self.concurrency, self.per_key_concurrency, self.rate, self.per_key_rate)
        )

    def groups(self, key: str) -> list[tuple[str, int]]:
        """The slot groups a turn of concurrency key ``key`` ("" for none) takes
        one slot of: (key, size), the queue's own ("") first."""
        groups = []
        if self.concurrency is not None:
            groups.append(("", self.concurrency))
        if key and self.per_key_concurrency is not None:
            groups.append((key, self.per_key_concurrency))
        return groups

    def cells(self, key: str) -> list[tuple[str, float, int]]:
        """The rate cells such a turn takes a token of: (key, rate, burst), the
        queue's own first (the order every admission locks them in)."""
        cells = []
        if self.rate is not None:
            cells.append(("", self.rate, self.burst))
        if key and self.per_key_rate is not None:
            cells.append((key, self.per_key_rate, self.per_key_burst))
        return cells

    def as_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "per_key_concurrency": self.per_key_concurrency,
            "rate": self.rate,
            "burst": self.burst,
            "per_key_rate": self.per_key_rate,
            "per_key_burst": self.per_key_burst,
        }


def parse_rate(value: Any) -> float | None:
    """Turns per second of a rate (``"20/s"``, ``"600/m"``, ``"10/h"`` or a
    positive number per second); None when it is not a usable rate."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        rate = float(value)
    elif isinstance(value, str) and (match := _RATE.match(value)):
        rate = float(match.group(1)) / _UNIT[match.group(2)]
    else:
        return None
    return rate if math.isfinite(rate) and 0 < rate <= 1_000_000 else None


def _count(value: Any, *, minimum: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if minimum <= value <= MAX_CONCURRENCY else None


def _queue_problems(name: Any, options: Any) -> list[Problem]:
    where = f"WEFT['QUEUES'][{name!r}]"
    if not isinstance(name, str) or not _NAME.match(name):
        return [
            Problem(
                "weft.E041",
                f"{where}: a queue name is 1 to {QUEUE_NAME_MAX} letters, digits or _ . : -.",
                "Rename the queue, e.g. 'payments'.",
            )
        ]
    if not isinstance(options, dict):
        return [Problem("weft.E042", f"{where} must be a dict of options.", _options_hint())]
    found: list[Problem] = []
    unknown = sorted(str(key) for key in options if key not in OPTIONS)
    if unknown:
        found.append(
            Problem(
                "weft.E042",
                f"{where} has unknown option(s): {', '.join(unknown)}.",
                _options_hint(),
            )
        )
    for key in ("concurrency", "per_key_concurrency"):
        if options.get(key) is not None and _count(options[key], minimum=1) is None:
            found.append(
                Problem(
                    "weft.E043",
                    f"{where}[{key!r}] must be an int from 1 to {MAX_CONCURRENCY}, "
                    f"got {options[key]!r}.",
                    "Set it to e.g. 10, or leave it out for no limit.",
                )
            )
    for key in ("rate", "per_key_rate"):
        if options.get(key) is not None and parse_rate(options[key]) is None:
            found.append(
                Problem(
                    "weft.E044",
                    f"{where}[{key!r}] must be a rate like '20/s', '600/m' or '10/h' (or a "
                    f"positive number per second), got {options[key]!r}.",
                    "Set it to e.g. '20/s', or leave it out for no limit.",
                )
            )
    for key in ("burst", "per_key_burst"):
        if options.get(key) is not None and _count(options[key], minimum=1) is None:
            found.append(
                Problem(
                    "weft.E044",
                    f"{where}[{key!r}] must be an int from 1 to {MAX_CONCURRENCY}, "
                    f"got {options[key]!r}.",
                    "Set it to e.g. the rate per second (the default), or 1 for strict spacing.",
                )
            )
    return found


def _options_hint() -> str:
    return f"Valid options are: {', '.join(OPTIONS)}."


def problems(value: Any = ..., *, mode: Any = ...) -> list[Problem]:
    """Every problem with ``WEFT["QUEUES"]`` (empty when valid or absent)."""
    try:
        raw = raw_settings()
    except WeftConfigurationError:
        return []  # settings.WEFT itself is wrong: weft.E001 says so
    if value is ...:
        value = raw.get("QUEUES")
    if mode is ...:
        mode = raw.get("OWNERSHIP", WORKFLOW_LEASE)
    if value is None:
        return []
    if not isinstance(value, dict):
        return [
            Problem(
                "weft.E040",
                "WEFT['QUEUES'] must be a dict of queue name -> options, not "
                f"{type(value).__name__}.",
                "Set e.g. WEFT['QUEUES'] = {'payments': {'concurrency': 10}}.",
            )
        ]
    found: list[Problem] = []
    for name, options in value.items():
        found += _queue_problems(name, options)
    limited = [
        name
        for name, options in value.items()
        if isinstance(options, dict)
        and any(options.get(k) is not None for k in ("concurrency", "per_key_concurrency"))
    ]
    if limited and mode == GLOBAL_LEASE:
        found.append(
            Problem(
                "weft.E045",
                f"WEFT['QUEUES'] sets concurrency limits ({', '.join(map(str, limited))}) but "
                f"WEFT['OWNERSHIP'] is {mode!r}: a slot belongs to a run's own claim, which "
                "that mode does not take.",
                f"Use WEFT['OWNERSHIP'] = {WORKFLOW_LEASE!r}, or drop the concurrency limits.",
            )
        )
    return found


# (the QUEUES object, a copy of it, the queues built from it), or None.
_cache: tuple[Any, Any, dict[str, QueueLimits]] | None = None


def queues() -> dict[str, QueueLimits]:
    """The configured queues by name (``"default"`` always there); cached until
    ``WEFT["QUEUES"]`` changes. Raises ``WeftConfigurationError`` when invalid."""
    global _cache
    value = raw_settings().get("QUEUES")
    cached = _cache
    if cached is not None and cached[0] is value and value == cached[1]:
        return cached[2]
    found = [p for p in problems(value, mode=None) if p.id != "weft.E045"]
    if found:
        raise WeftConfigurationError(f"{found[0].msg} {found[0].hint}")
    built = {DEFAULT_QUEUE: QueueLimits(DEFAULT_QUEUE)}
    for name, options in (value or {}).items():
        built[name] = QueueLimits(
            name,
            concurrency=options.get("concurrency"),
            per_key_concurrency=options.get("per_key_concurrency"),
            rate=parse_rate(options["rate"]) if options.get("rate") is not None else None,
            burst=options.get("burst") or _second_of(options.get("rate")),
            per_key_rate=(
                parse_rate(options["per_key_rate"])
                if options.get("per_key_rate") is not None
                else None
            ),
            per_key_burst=options.get("per_key_burst") or _second_of(options.get("per_key_rate")),
        )
    _cache = (value, dict(value) if isinstance(value, dict) else value, built)
    return built


def _second_of(rate: Any) -> int:
    """The default burst of a rate: one second's worth of turns (at least 1), so
    a turn that comes a tick late does not lose its place for good."""
    per_second = parse_rate(rate) if rate is not None else None
    return max(1, min(MAX_CONCURRENCY, math.ceil(per_second))) if per_second else 1


def limits_of(queue: str) -> QueueLimits | None:
    """The limits of ``queue`` when it has any (None: its turns pass freely)."""
    limits = queues().get(queue)
    return limits if limits is not None and limits.limited else None


def check_queue(queue: Any, what: str = "queue") -> str:
    """``queue`` (None: the default queue) as a configured queue name;
    :class:`FlowControlError` otherwise."""
    if queue is None:
        return DEFAULT_QUEUE
    if not isinstance(queue, str) or not _NAME.match(queue):
        raise FlowControlError(
            what, queue, f"must be a queue name of 1 to {QUEUE_NAME_MAX} letters, digits or _ . : -"
        )
    if queue not in queues():
        raise FlowControlError(what, queue, "is not a queue of WEFT['QUEUES'] (nor 'default')")
    return queue


def check_priority(priority: Any) -> int:
    """``priority`` as an int from -100 to 100; :class:`FlowControlError` otherwise."""
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not PRIORITY_MIN <= priority <= PRIORITY_MAX
    ):
        raise FlowControlError(
            "priority", priority, f"must be an int from {PRIORITY_MIN} to {PRIORITY_MAX}"
        )
    return priority


def check_key(key: Any) -> str | None:
    """``concurrency_key`` as a string of 1 to 128 characters (or None);
    :class:`FlowControlError` otherwise."""
    if key is None:
        return None
    if not isinstance(key, str) or not 0 < len(key) <= KEY_MAX or "\x00" in key:
        raise FlowControlError(
            "concurrency_key", key, f"must be a string of 1 to {KEY_MAX} characters, no NUL"
        )
    return key
