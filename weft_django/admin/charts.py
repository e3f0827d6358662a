"""The admin's pictures as geometry: the overview's charts, and the words for
durations every picture and page uses.

Pure Python, no query and no HTML: the functions here turn counts into
columns (``x``, ``y``, ``width``, ``height`` in the SVG's ``viewBox`` units)
and the template ``admin/weft_django/_chart_svg.html`` draws them as inline
SVG (no JavaScript, nothing fetched: the admin works offline). The run's
timeline picture is :mod:`.pictures`. Colours are the templates' business
(the admin's CSS variables, so dark mode follows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

#: The width of a character of 11 px text, in viewBox units (to cut labels).
CHAR_WIDTH = 6.2


def human_duration(seconds: float | timedelta | None) -> str:
    """``seconds`` for a person: ``"4 ms"``, ``"1.2 s"``, ``"3 min 4 s"``,
    ``"2 h 5 min"``, ``"3 d 4 h"`` (``""`` for ``None``)."""
    if seconds is None:
        return ""
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    sign = "-" if seconds < 0 else ""
    value = abs(float(seconds))
    if value < 1:
        millis = value * 1000
        return f"{sign}{millis:.1f} ms" if 0 < millis < 10 else f"{sign}{millis:.0f} ms"
    if value < 60:
        return f"{sign}{value:.1f} s"
    whole = round(value)
    for big, big_unit, small, small_unit in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "min"),
        (60, "min", 1, "s"),
    ):
        if whole >= big:
            first, rest = divmod(whole, big)
            second = rest // small
            return f"{sign}{first} {big_unit}" + (f" {second} {small_unit}" if second else "")
    return f"{sign}{whole} s"  # pragma: no cover (value >= 60 is handled above)


def fit(text: str, width: float) -> str:
    """``text`` cut (with an ellipsis) to what ``width`` units of 11 px text hold."""
    chars = max(int(width // CHAR_WIDTH), 0)
    if len(text) <= chars:
        return text
    return text[: chars - 1] + "\u2026" if chars > 1 else ""


# -- the overview's charts ----------------------------------------------------------

CHART_WIDTH = 320
CHART_HEIGHT = 70
CHART_AXIS = 14


@dataclass
class Column:
    x: float
    y: float
    width: float
    height: float
    value: float
    at: datetime | None
    label: str
    title: str


@dataclass
class Chart:
    """A small column chart: one column per minute (or per engine)."""

    name: str
    title: str
    width: int
    height: int
    plot_height: int
    columns: list[Column]
    peak: float
    total: float
    unit: str
    first: datetime | None = None
    last: datetime | None = None
    note: str = ""

    @property
    def description(self) -> str:
        total, peak = format_value(self.total), format_value(self.peak)
        return f"{self.title}: total {total}, peak {peak} {self.unit}"


def format_value(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def minutes_of(now: datetime, minutes: int = 60) -> list[datetime]:
    """The starts of the last ``minutes`` minutes, the current one last."""
    current = now.replace(second=0, microsecond=0)
    return [current - timedelta(minutes=minutes - 1 - i) for i in range(minutes)]


def minute_chart(
    name: str,
    title: str,
    counts: dict[datetime, float],
    now: datetime,
    *,
    minutes: int = 60,
    unit: str = "per minute",
    per_second: bool = False,
    note: str = "",
) -> Chart:
    """One column per minute of the last ``minutes`` (height = the count, or the
    count per second of the minute with ``per_second``: the current minute by
    the seconds it has had)."""
    starts = minutes_of(now, minutes)
    values: list[float] = []
    for start in starts:
        count = float(counts.get(start, 0))
        if per_second:
            elapsed = min(max((now - start).total_seconds(), 1.0), 60.0)
            count = round(count / elapsed, 2)
        values.append(count)
    peak = max(values, default=0.0)
    plot = CHART_HEIGHT - CHART_AXIS
    slot = CHART_WIDTH / max(len(starts), 1)
    columns: list[Column] = []
    for start, value in zip(starts, values, strict=True):
        height = round(plot * value / peak, 1) if peak else 0.0
        if value and height < 1:
            height = 1.0
        columns.append(
            Column(
                x=round(slot * len(columns), 1),
                y=round(plot - height, 1),
                width=round(max(slot - 1, 1), 1),
                height=height,
                value=value,
                at=start,
                label="",
                title=f"{format_value(value)} {unit}",
            )
        )
    total = sum(float(counts.get(start, 0)) for start in starts)
    return Chart(
        name=name,
        title=title,
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        plot_height=plot,
        columns=columns,
        peak=peak,
        total=total,
        unit=unit,
        first=starts[0] if starts else None,
        last=starts[-1] if starts else None,
        note=note,
    )


def engine_chart(name: str, title: str, held: Sequence[tuple[str, int, bool]]) -> Chart:
    """One column per live engine: ``(label, claims held, capped)``."""
    peak = float(max((count for _, count, _ in held), default=0))
    plot = CHART_HEIGHT - CHART_AXIS
    slot = CHART_WIDTH / max(len(held), 1)
    columns: list[Column] = []
    for index, (label, count, capped) in enumerate(held):
        height = round(plot * count / peak, 1) if peak else 0.0
        if count and height < 1:
            height = 1.0
        shown = f"{count - 1:,}+" if capped else f"{count:,}"
        columns.append(
            Column(
                x=round(slot * index, 1),
                y=round(plot - height, 1),
                width=round(max(min(slot - 2, 40), 1), 1),
                height=height,
                value=float(count),
                at=None,
                label=fit(label, max(slot - 2, 0)),
                title=f"{label}: {shown} claims held",
            )
        )
    return Chart(
        name=name,
        title=title,
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        plot_height=plot,
        columns=columns,
        peak=peak,
        total=float(sum(count for _, count, _ in held)),
        unit="claims",
    )
