"""Prometheus metrics of the schedule-firing pass, in weft's own registry (the
one ``weft_worker --metrics-port`` serves). Labelled by schedule name, never by
run id."""

from __future__ import annotations

from prometheus_client import Counter

from ..ownership import metrics

#: Why a tick was not fired.
SKIP_REASONS = ("catch_up", "late", "overlap", "paused")

fired = Counter(
    "weft_schedule_ticks_fired_total",
    "Schedule ticks that started their run (a duplicate tick refused by the database "
    "is not counted).",
    ["schedule"],
    registry=metrics.REGISTRY,
)

skipped = Counter(
    "weft_schedule_ticks_skipped_total",
    "Schedule ticks not fired, by reason: catch_up (missed during an outage, dropped by "
    "the catch-up policy), late (policy skip), overlap (the previous run unfinished).",
    ["schedule", "reason"],
    registry=metrics.REGISTRY,
)

late = Counter(
    "weft_schedule_ticks_late_total",
    "Schedule ticks fired later than the takeover bound (CLAIM_TTL + 3 x "
    "CLAIM_RENEW_INTERVAL) after their time: caught up after an outage, or queued.",
    ["schedule"],
    registry=metrics.REGISTRY,
)

duplicates = Counter(
    "weft_schedule_ticks_duplicate_total",
    "Schedule ticks whose run already existed (a second firing refused by the run's unique id).",
    ["schedule"],
    registry=metrics.REGISTRY,
)

errors = Counter(
    "weft_schedule_fire_errors_total",
    "Schedule ticks that could not be started (e.g. the workflow is not registered in "
    "this worker); retried on the next pass.",
    ["schedule"],
    registry=metrics.REGISTRY,
)
