"""The database's clock: every liveness judgment is made against it (DESIGN.md §4.3)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.db import connections
from django.utils.dateparse import parse_datetime

Clock = Callable[[], datetime]


def db_now(using: str = "default") -> datetime:
    """The current time as the database sees it, timezone-aware (UTC)."""
    connection = connections[using]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT clock_timestamp()")
        elif connection.vendor == "sqlite":
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
        elif connection.vendor == "mysql":
            cursor.execute("SELECT UTC_TIMESTAMP(6)")
        else:
            cursor.execute("SELECT CURRENT_TIMESTAMP")
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
        return value.replace(tzinfo=dt_timezone.utc)
    return value.astimezone(dt_timezone.utc)


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)
