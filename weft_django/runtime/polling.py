"""The caller side of a wait: re-read the database with backoff until an answer
comes or the timeout passes (``weft.result``, ``weft.update``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class NotYet:
    """Returned by a poll's ``check`` while there is no answer yet."""


NOT_YET = NotYet()


@dataclass(frozen=True)
class Backoff:
    """Delays between reads: ``first``, growing by ``growth``, capped at
    ``fine_cap`` for the first ``fine_for`` seconds and at ``cap`` after."""

    first: float
    growth: float
    cap: float
    fine_cap: float = math.inf
    fine_for: float = 0.0

    def next(self, delay: float, elapsed: float) -> float:
        limit = min(self.fine_cap, self.cap) if elapsed < self.fine_for else self.cap
        return min(delay * self.growth, limit)


# An update's answer comes within tens of milliseconds with NOTIFY, within a fast
# tick without: read finely at first, then back off to bound the load of long waits.
UPDATE_BACKOFF = Backoff(first=0.002, growth=1.25, cap=0.1, fine_cap=0.01, fine_for=1.0)
# A run's result may take anything from milliseconds to days.
RESULT_BACKOFF = Backoff(first=0.02, growth=1.5, cap=0.5)


def check_timeout(timeout: float | None) -> float | None:
    """A caller's timeout: None (wait forever) or a finite number of seconds."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}")
    if not math.isfinite(timeout):
        raise ValueError(f"timeout must be a finite number of seconds or None, not {timeout}")
    return float(timeout)


class Poll(Generic[T]):
    """``Poll(check, timeout=..., backoff=...).wait(on_timeout)``."""

    def __init__(
        self, check: Callable[[], T | NotYet], *, timeout: float | None, backoff: Backoff
    ) -> None:
        self.check = check
        self.timeout = check_timeout(timeout)
        self.backoff = backoff

    def wait(self, on_timeout: Callable[[], BaseException]) -> T:
        """The first answer ``check`` gives; raises ``on_timeout()`` past the timeout."""
        began = time.monotonic()
        deadline = None if self.timeout is None else began + max(self.timeout, 0.0)
        delay = self.backoff.first
        while True:
            answer = self.check()
            if not isinstance(answer, NotYet):
                return answer
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise on_timeout()
            time.sleep(delay if deadline is None else min(delay, deadline - now))
            delay = self.backoff.next(delay, now - began)
