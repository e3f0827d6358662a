"""The database's clock: every liveness judgment is made against it (docs/ownership.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models.functions import Now
from django.utils.dateparse import parse_datetime

from ..models import db_for

Clock = Callable[[], datetime]

# The SQL for "now" on each backend, as a statement of its own or inside another.
# MySQL/MariaDB: UTC_TIMESTAMP, not NOW()/CURRENT_TIMESTAMP, which are in the
# session's time zone while Django stores naive UTC datetimes there.
NOW_SQL = {
    "postgresql": "clock_timestamp()",
    "sqlite": "strftime('%Y-%m-%d %H:%M:%f', 'now')",
    "mysql": "UTC_TIMESTAMP(6)",
}


class DbNow(Now):
    """Django's ``Now()`` (the database's own now, inside the statement), in UTC
    on MySQL/MariaDB too, whatever the session's ``time_zone``."""

    def as_mysql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(compiler, connection, template=NOW_SQL["mysql"], **extra_context)


def db_now(using: str | None = None) -> datetime:
    """The current time as the database sees it, timezone-aware (UTC)."""
    connection = connections[db_for(using)]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {NOW_SQL.get(connection.vendor, 'CURRENT_TIMESTAMP')}")
        value = cursor.fetchone()[0]
    return as_aware(value)


class SteadyClock:
    """A clock read at most once per ``max_age`` seconds and counted forward on
    the monotonic clock in between: for judgments that need the database's
    time but not to the millisecond, several times a second (which held runs
    are due, which pending runs may start). Fencing never uses it: every
    ownership write judges time inside its own statement."""

    def __init__(
        self,
        read: Clock,
        max_age: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        seed: tuple[datetime, float] | None = None,
    ) -> None:
        """``seed``: a reading already made, (clock read, ``monotonic()`` then)."""
        self._read = read
        self.max_age = max_age
        self._monotonic = monotonic
        self._last: tuple[datetime, float] | None = seed  # (clock read, monotonic then)

    def __call__(self) -> datetime:
        now = self._monotonic()
        last = self._last
        if last is None or not 0 <= now - last[1] < self.max_age:
            value = self._read()
            self._last = (value, self._monotonic())
            return value
        return last[0] + timedelta(seconds=now - last[1])


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
