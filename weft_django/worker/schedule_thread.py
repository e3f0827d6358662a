"""The schedule-firing pass of ``manage.py weft_worker`` (docs/schedules.md): a
``weft-schedules`` thread, started when schedules are declared (unless the
worker runs with ``--no-schedules``).

Every worker runs it; the schedule lease (a single row) makes one of them the
firer at a time. The holder fires due ticks and renews the lease every pass;
the others try to take the lease every renew interval, so a SIGKILLed or
frozen firer is replaced within ``CLAIM_TTL + 3 x CLAIM_RENEW_INTERVAL``. The
holder wakes at the next tick (at most a renew interval away); the lease is
released when the worker stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..conf import Timing
from ..runtime import registry
from ..schedules.declare import declared
from ..schedules.firing import Firer, FireSummary
from .supervision import safely

logger = logging.getLogger("weft_django.schedules")

#: The shortest wait between passes (a tick that is due now fires at once).
MIN_WAIT = 0.02


class ScheduleLoop:
    """The body of the ``weft-schedules`` thread of one worker."""

    def __init__(
        self, engine_id: str, timing: Timing, stop: threading.Event, *, using: str | None = None
    ) -> None:
        self.firer = Firer(engine_id, timing, using=using)
        self.timing = timing
        self.stop = stop
        self.last: FireSummary | None = None
        self.passes = 0

    def __call__(self) -> None:
        try:
            while not self.stop.is_set():
                safely("schedules", self.once)
                self.stop.wait(self.wait())
        finally:
            safely("release the schedule lease", self.firer.lease.release)

    def once(self) -> FireSummary | None:
        self.last = None
        summary = self.firer.once()
        if summary is not None:
            self.last = summary
            self.passes += 1
        return summary

    def wait(self) -> float:
        """Seconds to the next due tick when holding the lease (at least
        ``MIN_WAIT``, at most a renew interval: the cadence at which the lease is
        renewed or tried, and a failing tick retried)."""
        interval = self.timing.renew_interval
        if not self.firer.lease.held or self.last is None or self.last.errors:
            return interval  # not the firer, or a tick failed: retry in a renew interval
        due = safely("schedules: next tick", self._next_due)
        if due is None:
            return interval
        return min(interval, max(MIN_WAIT, due))

    def _next_due(self) -> float | None:
        tick: datetime | None = self.firer.next_due()
        if tick is None:
            return None
        started = time.monotonic()
        now = self.firer.lease.now()
        return (tick - now).total_seconds() - (time.monotonic() - started)


def schedule_loop(
    engine_id: str, timing: Timing, stop: threading.Event, *, using: str | None = None
) -> Callable[[], Any] | None:
    """The ``weft-schedules`` thread's body, or None when no schedule is declared.
    A bad declaration raises ``WeftConfigurationError`` (at boot).

    None too on a worker that serves only some task queues (``--task-queue``)
    when a scheduled task is on another queue: the firer starts every
    schedule's runs (the firing pass is all or nothing under one lease), so
    such a worker leaves the lease to the workers that know every queue."""
    specs = declared()
    if not specs:
        return None
    unserved = sorted(
        {
            spec.workflow_name
            for spec in specs.values()
            if spec.task is not None and not registry.is_registered(spec.workflow_name)
        }
    )
    if unserved:
        logger.warning(
            "this worker does not fire schedules: scheduled tasks run on %s, which it "
            "does not serve (--task-queue); a worker serving every queue fires them",
            ", ".join(unserved),
        )
        return None
    return ScheduleLoop(engine_id, timing, stop, using=using)
