"""Keeping a worker honest: supervised threads, and a watch on its own renewals.

* :class:`Supervisor` runs each background thread of a worker and restarts it,
  with exponential backoff, when it dies of an unexpected exception: no thread
  of a worker can die silently while the others go on.
* :class:`RenewalWatch` tracks the worker's last successful renewal of its
  engine lease. Past the TTL without one, the worker may have been deposed: it
  stops claiming and driving until a renewal succeeds again. When its renewals
  keep *failing* for ``exit_after`` it gives up, so a process supervisor can
  start a fresh one. (A worker that was merely frozen, say for a long GC pause,
  renews as soon as it runs again: the time it was frozen is not a failure.)
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError

from ..ownership import metrics
from .pool import close_connections, recycle_connections

logger = logging.getLogger("weft_django.worker")


def safely(what: str, fn: Callable[[], Any]) -> Any:
    """One unit of a worker loop: connections recycled around it; an error is logged
    and swallowed (None), so the loop retries next time instead of dying."""
    try:
        recycle_connections()
        return fn()
    except DatabaseError as exc:
        logger.warning("%s: database error, retried next time: %s", what, exc)
        return None
    except Exception:
        logger.exception("%s failed; retried next time", what)
        return None
    finally:
        try:
            recycle_connections()
        except Exception:
            logger.exception("%s: could not recycle database connections", what)


class Supervisor:
    """Start and supervise the background threads of one worker."""

    def __init__(
        self, stop: threading.Event, *, first_delay: float = 0.1, max_delay: float = 30.0
    ) -> None:
        self.stop = stop
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.threads: list[threading.Thread] = []

    def spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=self._run, args=(name, target), name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def _run(self, name: str, target: Callable[[], None]) -> None:
        """Run ``target``; when it raises, log it and run it again after a backoff.

        A target that returns has finished its work (the worker is stopping).
        """
        delay = self.first_delay
        while True:
            try:
                target()
                return
            except Exception:
                if self.stop.is_set():
                    return
                logger.exception("thread %s died; restarting it in %.1fs", name, delay)
                metrics.thread_restarts.labels(thread=name).inc()
            finally:
                close_connections()
            if self.stop.wait(delay):
                return
            delay = min(delay * 2, self.max_delay)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0.01))


class Health(enum.StrEnum):
    HEALTHY = "healthy"  # renewed within the TTL
    SUSPECT = "suspect"  # no renewal for longer than the TTL: may have been deposed
    GIVE_UP = "give_up"  # no renewal for longer than exit_after: exit, to be restarted


class RenewalWatch:
    """The time since this worker's last successful renewal, and what it means."""

    def __init__(
        self,
        *,
        ttl: float,
        exit_after: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.exit_after = exit_after
        self.clock = clock
        self._renewed_at = clock()  # the engine row was just registered with a fresh lease
        self._failing_since: float | None = None
        self._lock = threading.Lock()
        self._warned = False

    def failed(self) -> None:
        """A renewal attempt failed (an error, or the engine row was not renewed)."""
        with self._lock:
            if self._failing_since is None:
                self._failing_since = self.clock()

    def renewed(self) -> None:
        with self._lock:
            self._renewed_at = self.clock()
            self._failing_since = None
            warned, self._warned = self._warned, False
        metrics.last_renewal.set_to_current_time()
        if warned:
            logger.info("renewal succeeded again: claiming and driving")

    def allows_driving(self) -> bool:
        """Healthy; else say once that nothing is claimed or driven until a renewal."""
        if self.health() is Health.HEALTHY:
            return True
        with self._lock:
            warned, self._warned = self._warned, True
        if not warned:
            logger.warning(
                "no successful renewal for %.0fs (TTL %gs): not claiming or driving until "
                "a renewal succeeds",
                self.silence(),
                self.ttl,
            )
        return False

    def gives_up(self) -> bool:
        """Renewals failing for longer than ``exit_after``: this worker should exit."""
        if self.health() is not Health.GIVE_UP:
            return False
        logger.error(
            "renewals have failed for %.0fs (no successful one for %.0fs): this worker may "
            "have been deposed and cannot recover; exiting so a process supervisor starts a "
            "fresh one",
            self.failing_for(),
            self.silence(),
        )
        return True

    def failing_for(self) -> float:
        """Seconds since the first of the renewal attempts failing now (0: none failing)."""
        with self._lock:
            return 0.0 if self._failing_since is None else self.clock() - self._failing_since

    def silence(self) -> float:
        """Seconds since the last successful renewal."""
        with self._lock:
            return self.clock() - self._renewed_at

    def health(self) -> Health:
        if self.failing_for() > self.exit_after:
            return Health.GIVE_UP
        if self.silence() > self.ttl:
            return Health.SUSPECT
        return Health.HEALTHY
