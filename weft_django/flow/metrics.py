"""Flow control's Prometheus metrics, in weft's own registry (the one
``weft_worker --metrics-port`` serves); labelled by queue, never by run id.

``weft_flow_throttled_total`` counts turns deferred, by queue and reason
(``slot`` or ``rate``). The gauges ``weft_queue_concurrency_limit``,
``weft_queue_slots_in_use`` and ``weft_queue_waiting`` (runs deferred by flow
control and not yet due again) are read from the database when scraped
(:class:`QueueCollector`, a few statements on the small slot table and the
wake index).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from django.db import DatabaseError, connection
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..exceptions import WeftConfigurationError
from ..ownership import metrics
from .overview import queue_overview

logger = logging.getLogger("weft_django.flow")

throttled = Counter(
    "weft_flow_throttled_total",
    "Turns deferred by their queue's limits (reason: slot or rate).",
    ["queue", "reason"],
    registry=metrics.REGISTRY,
)


class QueueCollector(Collector):
    """Each configured queue's limit, slots in use and waiting runs, read at scrape."""

    def collect(self) -> Iterator[Any]:
        limit = GaugeMetricFamily(
            "weft_queue_concurrency_limit",
            "The queue's concurrency limit (0: none).",
            labels=["queue"],
        )
        in_use = GaugeMetricFamily(
            "weft_queue_slots_in_use", "Concurrency slots of the queue held now.", labels=["queue"]
        )
        waiting = GaugeMetricFamily(
            "weft_queue_waiting",
            "Runs of the queue deferred by flow control, waiting for a slot or the rate window.",
            labels=["queue"],
        )
        try:
            rows = queue_overview()
        except (DatabaseError, RuntimeError, WeftConfigurationError) as exc:
            # (RuntimeError: a test process without database access.)
            logger.warning("queue gauges not read: %s", exc)
            rows = []
        finally:
            # A scrape runs on a thread of the metrics server's own: its connection
            # is closed after each (never inside a caller's transaction).
            if not connection.in_atomic_block:
                connection.close()
        for row in rows:
            limit.add_metric([row.name], row.limits.concurrency or 0)
            in_use.add_metric([row.name], row.slots_in_use)
            waiting.add_metric([row.name], row.waiting)
        yield limit
        yield in_use
        yield waiting


_collector = QueueCollector()
metrics.REGISTRY.register(_collector)
