"""The optional prune pass of ``manage.py weft_worker`` (docs/retention.md): a
``weft-prune`` thread, off unless ``WEFT["RETENTION"]["WORKER_INTERVAL"]`` is set.

Every interval it takes (or renews) the pruner lease, a single row, so at most
one worker of the store prunes at a time; the holder prunes one bounded pass
(a time budget of a third of the lease) and renews the lease between batches;
a worker that loses it stops after the batch in hand. The lease is released
when the worker stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..exceptions import WeftError
from ..retention.lease import PrunerLeaseManager
from ..retention.pruner import Batch, Pruner, PruneSummary
from ..retention.settings import RetentionPolicy, policy
from .supervision import safely

logger = logging.getLogger("weft_django.prune")

#: The pruner lease lasts this many intervals (at least ``MIN_TTL`` seconds).
TTL_INTERVALS = 3
MIN_TTL = 10.0


class LeaseLost(WeftError):
    """The pruner lease was taken over mid-pass: stop after the batch in hand."""


class PruneLoop:
    """The body of the ``weft-prune`` thread of one worker."""

    def __init__(
        self,
        engine_id: str,
        retention: RetentionPolicy,
        stop: threading.Event,
        *,
        using: str | None = None,
    ) -> None:
        if retention.worker_interval is None:
            raise ValueError("the worker prune pass is off (WORKER_INTERVAL is None)")
        self.retention = retention
        self.interval = retention.worker_interval
        self.stop = stop
        self.using = using
        self.lease = PrunerLeaseManager(
            engine_id, max(TTL_INTERVALS * self.interval, MIN_TTL), using=using
        )
        self.last: PruneSummary | None = None
        self.passes = 0

    def __call__(self) -> None:
        try:
            while not self.stop.is_set():
                safely("prune", self.once)
                self.stop.wait(self.interval)
        finally:
            safely("release the pruner lease", self.lease.release)

    def once(self) -> PruneSummary | None:
        """One round: take or renew the lease; prune once when held."""
        if not self.lease.try_acquire():
            return None
        pruner = Pruner(
            retention=self.retention,
            time_budget=self.lease.ttl / 3,
            on_batch=self._between_batches,
            using=self.using,
        )
        try:
            summary = pruner.run()
        except LeaseLost:
            logger.warning("prune pass: the pruner lease was lost; stopped")
            return None
        self.last = summary
        self.passes += 1
        deleted = " ".join(f"{table}={n}" for table, n in summary.deleted.items() if n)
        if deleted or not summary.complete:
            logger.info(
                "prune pass %.3fs %s%s",
                summary.seconds,
                deleted or "nothing",
                "" if summary.complete else " (time budget reached)",
            )
        return summary

    def _between_batches(self, batch: Batch) -> None:
        if self.stop.is_set() or not self.lease.renew():
            raise LeaseLost("pruner lease lost or worker stopping")


def prune_loop(
    engine_id: str, stop: threading.Event, *, using: str | None = None
) -> Callable[[], Any] | None:
    """The ``weft-prune`` thread's body, or None when the pass is off.
    Invalid retention settings raise ``WeftConfigurationError`` (at boot)."""
    retention = policy()
    if retention.worker_interval is None:
        return None
    return PruneLoop(engine_id, retention, stop, using=using)
