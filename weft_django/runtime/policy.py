"""Durations and the step retry policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


def as_seconds(value: float | int | timedelta | None, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be seconds or a timedelta, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class RetryPolicy:
    """How ``ctx.step`` retries a failing function (attempts include the first)."""

    max_attempts: int = 3
    initial_interval: float | timedelta = 1.0
    backoff: float = 2.0
    max_interval: float | timedelta = 30.0
    non_retryable: tuple[type[BaseException], ...] = ()

    def interval(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        first = as_seconds(self.initial_interval, "initial_interval") or 0.0
        cap = as_seconds(self.max_interval, "max_interval") or 0.0
        return min(first * (self.backoff ** (attempt - 1)), cap)
