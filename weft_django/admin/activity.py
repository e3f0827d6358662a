"""The overview over time: what the last hour looked like, from bounded queries.

Four statements, each a range scan (or a one-row lookup) on an index over the last hour only
(their cost follows the last hour's activity, never the size of the tables):

- runs started per minute: ``created_at`` in ``[hour ago, now]``, counted per
  minute off ``weft_run_created_idx``;
- runs completed and failed per minute: ``status IN (completed, failed)`` and
  ``finished_at`` in ``[hour ago, now]``, off ``weft_run_finished_idx``
  (``status, finished_at, id``);
- steps per second: the events table has no index on its time (every step
  writes it; an index there would be paid on the hottest insert), so the
  steps are counted among the newest :data:`STEP_SAMPLE` event ids (ids come
  from a sequence: ``BETWEEN newest - STEP_SAMPLE + 1 AND newest`` on the
  primary key holds at most that many rows; one more statement reads the
  newest id and the time of the first event in that range, one row each
  off the primary key). When the last hour holds more events than that, the
  chart covers the newest part and says since when.

Both run queries are written as ``BETWEEN`` (a bounded range): right after a
bulk load, with no statistics, PostgreSQL estimates a closed range as small
and walks the index, where an open ``>=`` is estimated at a third of the
table. The claims held per live engine come from the overview's engine rows
(no query of their own). See docs/admin.md ("The overview over time").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connections
from django.db.models import (
    BigIntegerField,
    Count,
    ExpressionWrapper,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import TruncMinute

from ..models import RunStatus, WorkflowEvent, WorkflowRun
from .charts import Chart, engine_chart, minute_chart, minutes_of

#: The window of the charts, in minutes.
WINDOW_MINUTES = 60
#: The newest events the steps-per-second chart reads at most.
STEP_SAMPLE = 50_000


def window(now: datetime, minutes: int = WINDOW_MINUTES) -> tuple[datetime, datetime]:
    """``[start of the oldest minute shown, now]``."""
    return minutes_of(now, minutes)[0], now


def _minute(value: datetime) -> datetime:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(second=0, microsecond=0)


def counted_per_minute(queryset: QuerySet, field: str, *extra: str) -> QuerySet:
    """``queryset`` counted per minute of ``field`` (UTC minutes), grouped by ``extra``."""
    return (
        queryset.order_by()
        .annotate(minute=TruncMinute(field, tzinfo=UTC))
        .values("minute", *extra)
        .annotate(n=Count("*"))
        .order_by()
    )


def per_minute(queryset: QuerySet, field: str, *extra: str) -> list[dict[str, Any]]:
    return list(counted_per_minute(queryset, field, *extra))


def started_query(since: datetime, now: datetime, using: str) -> QuerySet:
    return WorkflowRun.objects.using(using).filter(created_at__range=(since, now))


def finished_query(since: datetime, now: datetime, using: str) -> QuerySet:
    return WorkflowRun.objects.using(using).filter(
        status__in=[RunStatus.COMPLETED, RunStatus.FAILED], finished_at__range=(since, now)
    )


def step_bounds(using: str) -> tuple[int | None, int | None, datetime | None]:
    """The newest event id, the lowest id of the newest :data:`STEP_SAMPLE`
    ids (ids come from a sequence: that range holds at most that many events)
    and the time of the first event in it: one statement, two scalar
    subqueries, each one row off the primary key (no ``OFFSET`` walk)."""
    events = WorkflowEvent.objects.using(using)
    newest = events.order_by("-id").values("id")[:1]
    low = ExpressionWrapper(
        Subquery(newest) - Value(STEP_SAMPLE - 1), output_field=BigIntegerField()
    )
    first_at = events.filter(id__gte=low).order_by("id").values("created_at")[:1]
    connection = connections[using]
    parts, params = [], []
    for queryset in (newest, first_at):
        sql, sql_params = queryset.query.get_compiler(using=using).as_sql()
        parts.append(f"({sql})")
        params.extend(sql_params)
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts), params)
        top, first = cursor.fetchone()
    if top is None:
        return None, None, None
    bottom = max(int(top) - STEP_SAMPLE + 1, 0)
    if isinstance(first, str):  # SQLite: the text of the subquery's datetime
        first = datetime.fromisoformat(first)
    if isinstance(first, datetime) and first.tzinfo is None:  # stored in UTC
        first = first.replace(tzinfo=UTC)
    # Below the sample's bottom there may be older events: say since when it covers.
    return int(top), bottom, first if bottom > 0 else None


def steps_query(since: datetime, now: datetime, low: int, high: int, using: str) -> QuerySet:
    return WorkflowEvent.objects.using(using).filter(
        id__range=(low, high), kind="step", created_at__range=(since, now)
    )


def activity_charts(now: datetime, engine_rows: list[dict[str, Any]], *, using: str) -> list[Chart]:
    """The overview's charts: runs started, completed and failed per minute,
    steps per second (per minute), claims held per live engine."""
    since, until = window(now)
    started: dict[datetime, float] = {}
    for row in per_minute(started_query(since, until, using), "created_at"):
        started[_minute(row["minute"])] = row["n"]
    finished: dict[str, dict[datetime, float]] = {RunStatus.COMPLETED: {}, RunStatus.FAILED: {}}
    for row in per_minute(finished_query(since, until, using), "finished_at", "status"):
        finished[row["status"]][_minute(row["minute"])] = row["n"]
    newest, oldest, oldest_at = step_bounds(using)
    steps: dict[datetime, float] = {}
    note = ""
    if newest is not None:
        low = oldest or 0
        for row in per_minute(steps_query(since, until, low, newest, using), "created_at"):
            steps[_minute(row["minute"])] = row["n"]
        if oldest_at is not None and oldest_at > since:
            note = (
                f"from the newest {STEP_SAMPLE:,} events, since "
                f"{oldest_at.astimezone(UTC):%H:%M:%S} UTC"
            )
    live = [row for row in engine_rows if row["state"] in ("live", "expiring")]
    held = [(row["engine"].pk, row["claims_held"].value, row["claims_held"].capped) for row in live]
    return [
        minute_chart("started", "Runs started per minute", started, now),
        minute_chart("completed", "Runs completed per minute", finished[RunStatus.COMPLETED], now),
        minute_chart("failed", "Runs failed per minute", finished[RunStatus.FAILED], now),
        minute_chart(
            "steps",
            "Steps per second",
            steps,
            now,
            unit="steps/s",
            per_second=True,
            note=note,
        ),
        engine_chart("claims", "Claims held per live engine", held),
    ]
