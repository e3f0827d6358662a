"""Backing off a run whose turns keep failing on the database.

A turn abandoned on a database error keeps its claim and is retried, but not
at once: after the n-th consecutive failure the run waits
``base x 2^(n-1)`` seconds (capped at ``cap``, with jitter), so a checkpoint
the database keeps refusing cannot turn into a loop that repeats a step's side
effect thousands of times. After ``limit`` consecutive refusals the engine
suspends the run with the error stored (``resume()`` it once the cause is
fixed). Connection and lock failures (the database restarting, a lock wait
timing out) back off the same way but never suspend a run: they end when the
database comes back.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import InterfaceError, OperationalError

from ..ownership import MYSQL_LOCK_WAIT_TIMEOUT

# SQLSTATE classes of failures that end by themselves: connection exceptions,
# operator intervention (a terminated backend, a shutdown), transaction rollbacks
# (serialization failures, deadlocks), insufficient resources; and a session the
# server ended for sitting idle in a transaction.
_TRANSIENT_CLASSES = ("08", "57", "40", "53")
_TRANSIENT_STATES = ("25P03", "55P03")
# MySQL/MariaDB report nearly every server error as an OperationalError, so there
# the error number decides: too many connections, shutdown in progress, lock wait
# timeout, deadlock, query interrupted, connection killed, idle transaction timed
# out; and every client error (2000 and up: server gone away, lost connection).
_MYSQL_TRANSIENT_CODES = frozenset({1040, 1053, MYSQL_LOCK_WAIT_TIMEOUT, 1213, 1317, 1927, 4031})
_MYSQL_CLIENT_ERRORS = 2000


def _mysql_code(cause: BaseException | None) -> int | None:
    if cause is None or not type(cause).__module__.startswith("MySQLdb"):
        return None
    code = cause.args[0] if cause.args else None
    return code if isinstance(code, int) else None


def is_transient(error: BaseException | None) -> bool:
    """A failure of the connection, a lock wait or the server, not a refusal of the write."""
    cause = getattr(error, "__cause__", None)
    code = _mysql_code(cause)
    if code is not None:
        return code >= _MYSQL_CLIENT_ERRORS or code in _MYSQL_TRANSIENT_CODES
    if isinstance(error, (OperationalError, InterfaceError)):
        return True
    state = getattr(cause, "sqlstate", None) or ""
    return state.startswith(_TRANSIENT_CLASSES) or state in _TRANSIENT_STATES


# Deadlocks and serialization failures: the server rolled the transaction back,
# and running it again is the documented remedy.
_MYSQL_RETRY_CODES = frozenset({1213})
_RETRY_STATES = ("40P01", "40001")


def is_retryable_conflict(error: BaseException | None) -> bool:
    """A deadlock or serialization failure: the whole transaction may run again."""
    cause = getattr(error, "__cause__", None)
    code = _mysql_code(cause)
    if code is not None:
        return code in _MYSQL_RETRY_CODES
    return (getattr(cause, "sqlstate", None) or "") in _RETRY_STATES


@dataclass
class _Failures:
    count: int
    retry_at: float


class RunBackoff:
    """Consecutive infrastructure failures per run, and when each may be retried."""

    def __init__(
        self,
        *,
        base: float = 0.5,
        cap: float = 60.0,
        limit: int = 5,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.base = base
        self.cap = cap
        self.limit = limit
        self.clock = clock
        self.jitter = jitter
        self._lock = threading.Lock()
        self._runs: dict[str, _Failures] = {}

    def delay_for(self, count: int) -> float:
        """The wait after the ``count``-th consecutive failure: half to all of the
        exponential step (jitter spreads the retries of runs that failed together)."""
        step = min(self.base * 2 ** (count - 1), self.cap)
        return step * (0.5 + 0.5 * self.jitter())

    def failed(self, run_id: str) -> int:
        """Record a failure; returns how many in a row the run has had."""
        with self._lock:
            previous = self._runs.get(run_id)
            count = previous.count + 1 if previous else 1
            self._runs[run_id] = _Failures(count, self.clock() + self.delay_for(count))
            return count

    def succeeded(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def exhausted(self, count: int, error: BaseException | None) -> bool:
        """Whether ``count`` failures in a row, the last one ``error``, end the retries."""
        return count >= self.limit and not is_transient(error)

    def ready(self, run_id: str) -> bool:
        """Whether the run may be driven now."""
        with self._lock:
            failures = self._runs.get(run_id)
            return failures is None or self.clock() >= failures.retry_at

    def count(self, run_id: str) -> int:
        with self._lock:
            failures = self._runs.get(run_id)
            return failures.count if failures else 0
