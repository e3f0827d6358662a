"""Durations and the step retry policy."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any


def as_seconds(value: float | int | timedelta | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be seconds or a timedelta, not {value!r}")
    return float(value)


def _number(value: Any) -> float | None:
    """``value`` as a float when it is an int or float (not a bool), else None; an
    int too large for a float is infinite."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _seconds(value: Any, name: str) -> float:
    """``value`` as seconds: a number or a timedelta, finite and at least 0; a
    ValueError naming the field otherwise."""
    allowed = "seconds (a finite int or float) or a timedelta, at least 0"
    seconds = value.total_seconds() if isinstance(value, timedelta) else _number(value)
    if seconds is None or not 0 <= seconds < math.inf:  # also NaN
        raise ValueError(f"{name} must be {allowed}, not {value!r}")
    return seconds


def _exception_classes(value: Any) -> tuple[type[BaseException], ...]:
    """``non_retryable`` as a tuple of exception classes (a single class or a list
    is accepted); a ValueError naming what is not an exception class."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    for item in items:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise ValueError(
                "non_retryable must be an exception class or a tuple of exception "
                f"classes, not {value!r}"
            )
    return items


@dataclass(frozen=True)
class RetryPolicy:
    """How ``ctx.step`` retries a failing function (attempts include the first).

    ``max_attempts``: an int of at least 1 (1: no retry). ``initial_interval``:
    seconds or a timedelta, at least 0, waited after the first failed attempt;
    each later wait is ``backoff`` (a number of at least 1) times longer, up to
    ``max_interval`` (at least ``initial_interval``).
    ``non_retryable``: exception classes that fail the step at once. Anything
    else raises ValueError naming the field, the value and what is allowed.
    """

    max_attempts: int = 3
    initial_interval: float | timedelta = 1.0
    backoff: float = 2.0
    max_interval: float | timedelta = 30.0
    non_retryable: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise ValueError(
                "max_attempts must be an int of at least 1 (the first attempt counts; "
                f"1 means no retry), not {attempts!r}"
            )
        first = _seconds(self.initial_interval, "initial_interval")
        backoff = _number(self.backoff)
        if backoff is None or not 1 <= backoff < math.inf:
            raise ValueError(
                "backoff must be a finite number of at least 1 (1: every wait is "
                f"initial_interval), not {self.backoff!r}"
            )
        cap = _seconds(self.max_interval, "max_interval")
        if cap < first:
            raise ValueError(
                f"max_interval ({self.max_interval!r}) must be at least initial_interval "
                f"({self.initial_interval!r})"
            )
        object.__setattr__(self, "non_retryable", _exception_classes(self.non_retryable))

    def interval(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        first = _seconds(self.initial_interval, "initial_interval")
        cap = _seconds(self.max_interval, "max_interval")
        if first == 0:
            return 0.0
        try:
            grown = first * float(self.backoff) ** (attempt - 1)
        except OverflowError:  # a long run of attempts: the cap has long been reached
            grown = math.inf
        return min(grown, cap)


#: The fields of :class:`RetryPolicy`, in order (what ``TASKS`` ``RETRY`` dicts may set).
RETRY_FIELDS = tuple(field.name for field in fields(RetryPolicy))
