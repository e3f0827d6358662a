"""The database's clock: every liveness judgment is made against it (docs/ownership.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.db import connections
from django.utils.dateparse import parse_datetime

from ..models import db_for

Clock = Callable[[], datetime]

# The SQL for "now" on each backend, as a statement of its own or inside another.
NOW_SQL = {
    "postgresql": "clock_timestamp()",
    "sqlite": "strftime('%Y-%m-%d %H:%M:%f', 'now')",
    "mysql": "UTC_TIMESTAMP(6)",
}


def db_now(using: str | None = None) -> datetime:
    """The current time as the database sees it, timezone-aware (UTC)."""
    connection = connections[db_for(using)]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {NOW_SQL.get(connection.vendor, 'CURRENT_TIMESTAMP')}")
        value = cursor.fetchone()[0]
    return as_aware(value)


def as_aware(value: datetime | str) -> datetime:
    """Parse a raw database timestamp into an aware UTC datetime."""
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            raise ValueError(f"not a timestamp: {value!r}")
        value = parsed
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)
