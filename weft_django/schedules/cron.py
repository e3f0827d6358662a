"""Cron expressions and time zones, parsed by ``cronsim`` (never by hand).

An expression has five fields (minute hour day month weekday) or six, with
seconds first (``"*/10 * * * * *"``). Ticks are computed in the schedule's
time zone and handed out as UTC datetimes.

Daylight-saving time follows cronsim, which follows Debian cron:

* an expression whose minute and hour fields are both fixed (``"30 2 * * *"``,
  ``"0 9 * * 1-5"``; five fields) is read on the wall clock: a tick that falls
  in a spring-forward gap fires once, at the first valid instant after the gap
  (02:30 -> 03:00), and a tick in a repeated hour fires once, on its first
  occurrence;
* any other expression (``"*/5 * * * *"``, ``"0 * * * *"``, six fields) is read
  on the real timeline: the gap's wall times never exist, so nothing fires in
  them, and the repeated hour's instants are distinct, so it fires in both.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

#: cronsim gives up when an expression has no tick within 50 years.
HORIZON_YEARS = 50


class CronError(ValueError):
    """A cron expression or time zone that cannot be used (the message says why)."""


def zone(name: str | None) -> ZoneInfo:
    """The IANA time zone ``name`` (None: UTC); :class:`CronError` when unknown."""
    if name is None:
        return ZoneInfo("UTC")
    if not isinstance(name, str) or not name.strip():
        raise CronError(f"time zone must be an IANA name such as 'Europe/Berlin', not {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"unknown time zone {name!r}") from exc


class Cron:
    """A parsed cron expression in a time zone: its ticks, as UTC datetimes."""

    def __init__(self, expression: str, timezone: str | None = None) -> None:
        if not isinstance(expression, str):
            raise CronError(f"cron expression must be a string, not {expression!r}")
        self.expression = " ".join(expression.split())
        self.tz = zone(timezone)
        self.timezone = timezone or "UTC"
        try:
            first = self.after(datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as exc:
            raise CronError(f"bad cron expression {expression!r}: {exc}") from None
        if first is None:
            raise CronError(f"cron expression {expression!r} never fires")

    def __repr__(self) -> str:
        return f"Cron({self.expression!r}, {self.timezone!r})"

    def _iter(self, start: datetime, *, reverse: bool = False) -> Iterator[datetime]:
        local = start.astimezone(self.tz)
        for tick in CronSim(self.expression, local, reverse=reverse):
            yield tick.astimezone(UTC)

    def after(self, moment: datetime) -> datetime | None:
        """The first tick strictly after ``moment`` (None: none within 50 years)."""
        return next(self._iter(moment.replace(microsecond=0)), None)

    def upcoming(self, moment: datetime, count: int) -> list[datetime]:
        """The next ``count`` ticks strictly after ``moment``."""
        found: list[datetime] = []
        for tick in self._iter(moment.replace(microsecond=0)):
            if len(found) >= count:
                break
            found.append(tick)
        return found

    def latest(
        self, moment: datetime, *, since: datetime, limit: int
    ) -> tuple[list[datetime], int]:
        """The ticks in ``[since, moment]``: the latest ``limit`` of them, oldest
        first, and how many earlier ones there were besides (counted up to
        10,000 more; a longer outage reports that many)."""
        found: list[datetime] = []
        earlier = 0
        # Reverse from one microsecond past the second: ``moment`` itself counts.
        start = moment.replace(microsecond=0) + timedelta(microseconds=1)
        for tick in self._iter(start, reverse=True):
            if tick < since or earlier >= 10_000:
                break
            if len(found) < limit:
                found.append(tick)
            else:
                earlier += 1
        found.reverse()
        return found, earlier


def tick_id(name: str, tick: datetime) -> str:
    """The id of the run a tick starts: ``schedule:<name>:<UTC ISO time>``."""
    return f"schedule:{name}:{iso(tick)}"


def iso(moment: datetime) -> str:
    """``2026-03-29T01:00:00Z`` (microseconds only when there are some)."""
    text = moment.astimezone(UTC).replace(tzinfo=None).isoformat()
    return f"{text}Z"
