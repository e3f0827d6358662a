"""The worker's background threads besides the turn pool (docs/architecture.md).

* :func:`pass_loop`: the body of the renewal and scan threads, which run their
  passes in order every renew interval;
* :func:`optional_threads`: the threads a worker starts only when configured:
  the pruner (``WEFT["RETENTION"]["WORKER_INTERVAL"]``,
  :mod:`weft_django.worker.prune_thread`), the schedule firer (schedules are
  declared, :mod:`weft_django.worker.schedule_thread`) and the wake-up listener
  (PostgreSQL ``LISTEN`` or SQLite's change watch).

:class:`~weft_django.worker.host.Worker` decides when they start and stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..conf import WeftSettings
from ..ownership import PassResult
from ..runtime import wakeups
from .prune_thread import prune_loop
from .schedule_thread import schedule_loop
from .supervision import safely

#: A thread's passes, in order: (name, the pass).
Passes = tuple[tuple[str, Callable[[], PassResult | None]], ...]
#: The scan thread's passes (methods of ``EnginePasses``), in order. The
#: renewal thread has one: ``renew``.
SCAN_PASSES = ("reclaim", "signal_poll", "update_poll", "timeouts")


def pass_loop(
    passes: Passes,
    stop: threading.Event,
    interval: float,
    publish: Callable[[PassResult], None],
    record: Callable[[], Any],
    *,
    after: Callable[[], None] = lambda: None,
) -> None:
    """Run ``passes`` in order every ``interval`` seconds until ``stop``; after a
    round that produced results, ``record`` them (one statement per round)."""
    while not stop.is_set():
        began = time.monotonic()
        published = False
        for name, run_pass in passes:
            if stop.is_set():
                break
            result = safely(name, run_pass)
            if result is not None:
                publish(result)
                published = True
        if published:
            safely("record passes", record)
        after()
        stop.wait(max(interval - (time.monotonic() - began), 0.0))


def optional_threads(
    engine_id: str,
    settings: WeftSettings,
    stop: threading.Event,
    *,
    using: str,
    schedules: bool,
    on_notify: Callable[[], None],
) -> list[tuple[str, Callable[[], Any]]]:
    """The configured optional threads, as ``(name, body)``. A bad schedule
    declaration raises ``WeftConfigurationError`` (at boot)."""
    threads: list[tuple[str, Callable[[], Any]]] = []
    pruner = prune_loop(engine_id, stop, using=using)
    if pruner is not None:  # WEFT["RETENTION"]["WORKER_INTERVAL"] (docs/retention.md)
        threads.append(("weft-prune", pruner))
    firer = (
        schedule_loop(engine_id, settings.claim_timing, stop, using=using) if schedules else None
    )
    if firer is not None:  # @weft.schedule / WEFT["SCHEDULES"] (docs/schedules.md)
        threads.append(("weft-schedules", firer))
    source = wakeups.wake_source(using, settings, stop, on_notify)
    if source is not None:  # else the fast tick alone (MySQL/MariaDB, NOTIFY off)
        threads.append(source)
    return threads
