"""A run's timeline as geometry (the picture above the run page's table).

Pure Python, no query and no HTML: :func:`timeline_picture` turns one page
of a run's history into rectangles (``x``, ``y``, ``width``, ``height`` in
the SVG's ``viewBox`` units) and the words that go with them; the template
``admin/weft_django/_timeline_svg.html`` draws them as inline SVG (no
JavaScript, nothing fetched: the admin works offline). Colours are the
template's business (the admin's CSS variables, so dark mode follows); what
tells things apart in greyscale is decided here: a pattern per owner band
(even and odd), a ``failed`` flag drawn as a hatch and a cross, dashes for
waits, diamonds for the other events.

There is one row per step (a bar from the previous recorded event to the
step's own event: the time the history attributes to it) and one per wait (a
dashed gap from the wait's event to the next event, labelled with what it
waited on), a strip of markers for the other events (signals, updates,
children), and behind them a band per owner (engine and epoch). Each stretch
of time belongs to the owner that recorded the event ending it, so the bands
are contiguous and sized by duration; a boundary between two bands is an
ownership change (a takeover, or a new epoch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from .charts import fit, human_duration

#: The viewBox width of the picture, and its left gutter (row labels).
WIDTH = 960
GUTTER = 190
PLOT = WIDTH - GUTTER - 40  # room on the right for a failed step's marks
BAND_HEIGHT = 20
MARKER_ROW = 16
ROW_HEIGHT = 16
BAR_HEIGHT = 10
AXIS_HEIGHT = 22
MIN_BAR = 2.0
AXIS_TICKS = 5
#: Event kinds after which the run waits: the stretch to the next event is a wait.
WAITING_KINDS = frozenset({"wait", "sleep"})


@dataclass(frozen=True)
class Scale:
    """Maps instants in ``[start, end]`` to ``[left, left + width]``."""

    start: datetime
    end: datetime
    left: float
    width: float

    @property
    def seconds(self) -> float:
        return max((self.end - self.start).total_seconds(), 0.0)

    def x(self, at: datetime) -> float:
        span = self.seconds
        if span <= 0:
            return round(self.left, 1)
        offset = min(max((at - self.start).total_seconds(), 0.0), span)
        return round(self.left + self.width * offset / span, 1)

    def ticks(self, count: int = AXIS_TICKS) -> list[Tick]:
        if self.seconds <= 0:
            return [Tick(x=round(self.left, 1), at=self.start)]
        step = self.seconds / (count - 1)
        return [
            Tick(
                x=self.x(self.start + timedelta(seconds=step * i)),
                at=self.start + timedelta(seconds=step * i),
            )
            for i in range(count)
        ]


@dataclass(frozen=True)
class Tick:
    x: float
    at: datetime


@dataclass
class Band:
    """One owner's stretch: from where its first recorded work on the page
    began to where the next owner's began (:func:`_bands`)."""

    x: float
    width: float
    engine_id: str
    epoch: int
    start: datetime
    end: datetime
    index: int  # the band's position: even and odd bands get different patterns
    label: str
    title: str
    changed: bool  # an ownership change at its left edge
    shown: str = ""  # the label cut to what the band's width holds

    @property
    def seconds(self) -> float:
        return max((self.end - self.start).total_seconds(), 0.0)


@dataclass
class Bar:
    """A step: from the previous recorded event to its own event."""

    x: float
    y: float
    width: float
    seq: int
    name: str
    label: str
    seconds: float | None
    failed: bool
    attempts: int
    title: str

    @property
    def end(self) -> float:
        return round(self.x + self.width, 1)


@dataclass
class Gap:
    """A wait: from the wait's event to the next event (or the picture's end)."""

    x: float
    y: float
    width: float
    seq: int
    label: str
    seconds: float | None
    open: bool  # no later event on this page: still waiting, or continued on the next page
    title: str

    @property
    def end(self) -> float:
        return round(self.x + self.width, 1)


@dataclass
class Marker:
    """Any other event (a signal received, an update applied, a child started ...)."""

    x: float
    seq: int
    kind: str
    title: str
    failed: bool


@dataclass
class TimelinePicture:
    width: int
    height: int
    plot_left: int
    plot_width: int
    band_y: int
    marker_y: int
    rows_y: int
    axis_y: int
    start: datetime
    end: datetime
    bands: list[Band] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    row_labels: list[tuple[float, str]] = field(default_factory=list)

    @property
    def plot_right(self) -> int:
        return self.plot_left + self.plot_width

    @property
    def takeovers(self) -> list[Band]:
        return [band for band in self.bands if band.changed]

    @property
    def seconds(self) -> float:
        return max((self.end - self.start).total_seconds(), 0.0)

    @property
    def description(self) -> str:
        owners = len({(b.engine_id, b.epoch) for b in self.bands})
        return (
            f"{len(self.bars)} steps, {len(self.gaps)} waits, {len(self.markers)} other events, "
            f"{owners} owner(s), {len(self.takeovers)} ownership change(s), over "
            f"{human_duration(self.seconds)}"
        )


class EventLike(Protocol):
    seq: int
    kind: str
    name: str
    error: Any
    engine_id: str
    epoch: int
    created_at: datetime


class RowLike(Protocol):
    """What the picture needs of a timeline row (:class:`.timeline.TimelineRow`)."""

    event: Any
    summary: str
    took: float | None
    previous_at: datetime | None


def _attempts(error: Any) -> int:
    if isinstance(error, dict) and isinstance(error.get("attempts"), int):
        return int(error["attempts"])
    return 1


def _owner(event: EventLike, show_engines: bool) -> str:
    engine = (event.engine_id or "?") if show_engines else ""
    return f"{engine} \u00b7 epoch {event.epoch}" if engine else f"epoch {event.epoch}"


def timeline_picture(
    rows: Sequence[RowLike], *, until: datetime | None = None, show_engines: bool = True
) -> TimelinePicture | None:
    """The picture of one page of a run's timeline (``None`` without events).

    The time axis runs from the event before the page (``previous_at`` of the
    first row) to the last event, or to ``until`` (the database clock, for a
    run still waiting on the last page) when that is later. Without
    ``show_engines`` the bands name the epoch only."""
    if not rows:
        return None
    first_at = rows[0].previous_at or rows[0].event.created_at
    end = max(rows[-1].event.created_at, until or rows[-1].event.created_at)
    scale = Scale(first_at, end, GUTTER, PLOT)
    steps_and_waits = [r for r in rows if r.event.kind == "step" or r.event.kind in WAITING_KINDS]
    band_y = 0
    marker_y = BAND_HEIGHT + 2
    rows_y = marker_y + MARKER_ROW + 2
    axis_y = rows_y + max(len(steps_and_waits), 1) * ROW_HEIGHT + 4
    picture = TimelinePicture(
        width=WIDTH,
        height=axis_y + AXIS_HEIGHT,
        plot_left=GUTTER,
        plot_width=PLOT,
        band_y=band_y,
        marker_y=marker_y,
        rows_y=rows_y,
        axis_y=axis_y,
        start=first_at,
        end=end,
        ticks=scale.ticks(),
    )
    picture.bands = _bands(rows, scale, show_engines)
    line = 0
    for index, row in enumerate(rows):
        event = row.event
        at = event.created_at
        y = rows_y + line * ROW_HEIGHT + (ROW_HEIGHT - BAR_HEIGHT) / 2
        if event.kind == "step":
            # After a wait the step's start is not recorded (the wait's gap holds it).
            began = began_at(rows, index)
            after_wait = index > 0 and rows[index - 1].event.kind in WAITING_KINDS
            x = scale.x(began)
            width = max(scale.x(at) - x, MIN_BAR)
            x = round(min(x, GUTTER + PLOT - width), 1)  # a tick at the end stays inside
            seconds = None if after_wait else row.took
            attempts = _attempts(event.error)
            failed = event.error is not None
            took = human_duration(seconds) if seconds is not None else "duration not recorded"
            title = f"#{event.seq} step {event.name}: {took}" + (
                f", failed after {attempts} attempt(s)" if failed else ""
            )
            picture.bars.append(
                Bar(
                    x=x,
                    y=y,
                    width=round(width, 1),
                    seq=event.seq,
                    name=event.name,
                    label=fit(f"#{event.seq} {event.name}", GUTTER - 8),
                    seconds=seconds,
                    failed=failed,
                    attempts=attempts,
                    title=f"{title} \u2014 {row.summary}",
                )
            )
        elif event.kind in WAITING_KINDS:
            following = rows[index + 1].event.created_at if index + 1 < len(rows) else None
            stop = following or end
            x = scale.x(at)
            seconds = (stop - at).total_seconds() if stop >= at else 0.0
            what = row.summary
            picture.gaps.append(
                Gap(
                    x=x,
                    y=y,
                    width=round(max(scale.x(stop) - x, 0.0), 1),
                    seq=event.seq,
                    label=f"{what} ({human_duration(seconds)}{'+' if following is None else ''})",
                    seconds=seconds,
                    open=following is None,
                    title=f"#{event.seq} {what}: {human_duration(seconds)}"
                    + (" so far" if following is None else ""),
                )
            )
        else:
            picture.markers.append(
                Marker(
                    x=scale.x(at),
                    seq=event.seq,
                    kind=event.kind,
                    title=f"#{event.seq} {row.summary}",
                    failed=event.error is not None,
                )
            )
            continue
        label = (
            f"#{event.seq} {event.name}" if event.kind == "step" else f"#{event.seq} {event.kind}"
        )
        picture.row_labels.append((round(y + BAR_HEIGHT - 1, 1), fit(label, GUTTER - 8)))
        line += 1
    return picture


def began_at(rows: Sequence[RowLike], index: int) -> datetime:
    """When the work ``rows[index]`` records began, as far as the history says:
    a step, at the event before it (unless that was a wait: then unknown, its
    own time); any other event, at its own time."""
    row = rows[index]
    event = row.event
    if event.kind != "step" or row.previous_at is None:
        return event.created_at
    previous = rows[index - 1].event if index else None
    if previous is not None and previous.kind in WAITING_KINDS:
        return event.created_at
    return row.previous_at


def _bands(rows: Sequence[RowLike], scale: Scale, show_engines: bool) -> list[Band]:
    """Contiguous owner bands, each from where the owner's first work on the
    page began (:func:`began_at`) to where the next owner's began: a wait
    stays with the owner that parked the run until another records something."""
    bands: list[Band] = []
    start = scale.start
    for index, row in enumerate(rows):
        event = row.event
        owner = (event.engine_id, event.epoch)
        following = rows[index + 1].event if index + 1 < len(rows) else None
        if following is not None and (following.engine_id, following.epoch) == owner:
            continue
        stop = scale.end if following is None else max(began_at(rows, index + 1), start)
        x = scale.x(start)
        width = round(max(scale.x(stop) - x, 0.0), 1)
        name = _owner(event, show_engines)
        previous = bands[-1] if bands else None
        seconds = (stop - start).total_seconds()
        title = f"owner {name}: {human_duration(seconds)}"
        if previous is not None:
            title += (
                f" (took over from {previous.label})"
                if previous.engine_id != event.engine_id
                else " (new epoch)"
            )
        bands.append(
            Band(
                x=x,
                width=width,
                engine_id=event.engine_id,
                epoch=event.epoch,
                start=start,
                end=stop,
                index=len(bands),
                label=name,
                title=title,
                changed=previous is not None,
            )
        )
        start = stop
    for band in bands:
        band.shown = fit(band.label, band.width - 6)
    return bands
