"""A run's history as a paginated timeline, and what is pending for it.

A page is :data:`EVENTS_PER_PAGE` events read by ``(run, seq)`` (the unique
index), plus the one event before the page, so durations and ownership changes
are right at page boundaries. Each row says what happened in words: a step and
how long it took (time since the previous recorded event), a wait and what it
waits on, a signal consumed, an update applied or answered, and a marker when
the engine or the claim epoch differs from the previous event (an ownership
change). What an event says in words (:func:`describe`) and what is pending
(:func:`pending_for`) live in :mod:`weft_django.inspection.timeline`, shared
with ``manage.py weft``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from ..inspection.timeline import PENDING_LIMIT, describe, pending_for
from ..models import WorkflowEvent

EVENTS_PER_PAGE = 100


@dataclass
class TimelineRow:
    event: WorkflowEvent
    summary: str
    took: float | None
    owner_changed: bool
    previous_owner: str
    #: When the event before it was recorded (None for the run's first event).
    previous_at: datetime | None = None

    @property
    def failed(self) -> bool:
        return self.event.error is not None


def owner_of(event: WorkflowEvent | None) -> tuple[str, int] | None:
    return None if event is None else (event.engine_id, event.epoch)


def timeline_rows(
    events: list[WorkflowEvent], before: WorkflowEvent | None, *, payloads: bool = True
) -> list[TimelineRow]:
    rows = []
    previous = before
    for event in events:
        took: float | None = None
        if previous is not None and event.kind == "step":
            took = max((event.created_at - previous.created_at).total_seconds(), 0.0)
        changed = previous is None or owner_of(previous) != owner_of(event)
        rows.append(
            TimelineRow(
                event=event,
                summary=describe(event, payloads=payloads),
                took=took,
                owner_changed=changed,
                previous_owner=(
                    f"{previous.engine_id} @ epoch {previous.epoch}" if previous else ""
                ),
                previous_at=previous.created_at if previous is not None else None,
            )
        )
        previous = event
    return rows


def timeline_page(
    run_id: str, page_number: Any, *, using: str, payloads: bool = True
) -> tuple[Page, list[TimelineRow]]:
    """Page ``page_number`` (1-based; out of range -> the last page) of the run's
    history (without ``payloads``: the summaries leave results and errors out)."""
    events: QuerySet = WorkflowEvent.objects.using(using).filter(run_id=run_id).order_by("seq")
    page = Paginator(events, EVENTS_PER_PAGE).get_page(page_number)
    rows = list(page.object_list)
    before = None
    if rows and page.number > 1:
        before = events.filter(seq__lt=rows[0].seq).order_by("-seq").first()
    return page, timeline_rows(rows, before, payloads=payloads)


def lease_left(expires_at: datetime | None, now: datetime) -> float | None:
    return None if expires_at is None else (expires_at - now).total_seconds()


__all__ = [
    "EVENTS_PER_PAGE",
    "PENDING_LIMIT",
    "TimelineRow",
    "describe",
    "lease_left",
    "owner_of",
    "pending_for",
    "timeline_page",
    "timeline_rows",
]
