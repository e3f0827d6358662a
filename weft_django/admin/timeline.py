"""A run's history as a paginated timeline, and what is pending for it.

A page is :data:`EVENTS_PER_PAGE` events read by ``(run, seq)`` (the unique
index), plus the one event before the page, so durations and ownership changes
are right at page boundaries. Each row says what happened in words: a step and
how long it took (time since the previous recorded event), a wait and what it
waits on, a signal consumed, an update applied or answered, and a marker when
the engine or the claim epoch differs from the previous event (an ownership
change).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from ..models import UpdateRequest, UpdateStatus, WorkflowEvent, WorkflowSignal
from .display import compact_json

EVENTS_PER_PAGE = 100
PENDING_LIMIT = 100


@dataclass
class TimelineRow:
    event: WorkflowEvent
    summary: str
    took: float | None
    owner_changed: bool
    previous_owner: str

    @property
    def failed(self) -> bool:
        return self.event.error is not None


def describe(event: WorkflowEvent, *, payloads: bool = True) -> str:
    """One line on what the event records (without ``payloads``: what happened,
    not the data: results and errors are left out)."""
    if not payloads:
        return describe_without_payload(event)
    kind, name, result, error = event.kind, event.name, event.result, event.error
    if kind == "step":
        if error is not None:
            return f"step {name} failed: {compact_json(error)}"
        return f"step {name} -> {compact_json(result)}"
    if kind == "wait":
        deadline = (result or {}).get("deadline") if isinstance(result, dict) else None
        target = name.replace(":", " ", 1)
        return f"waits on {target}" + (f" (deadline {deadline})" if deadline else "")
    if kind == "sleep":
        until = (result or {}).get("until") if isinstance(result, dict) else None
        return f"sleeps until {until}"
    if kind == "signal":
        if error is not None:
            return f"signal {name}: timed out"
        return f"signal {name} received: {compact_json(result)}"
    if kind == "update":
        return f"update {name} applied: {compact_json(result)}"
    if kind == "update_wait":
        if error is not None:
            return f"update {name}: timed out"
        return f"update {name} taken by wait_for_update: {compact_json(result)}"
    if kind == "update_response":
        return f"answer to update {name}: {compact_json(result)}"
    if kind == "until":
        return "wait_until: " + ("timed out" if error is not None else "condition met")
    if kind == "child_start":
        return f"child {compact_json(result)} started ({name})"
    if kind == "child_result":
        return f"child {name} finished: {compact_json(error if error is not None else result)}"
    if kind == "patch":
        return f"patch {name}: the run takes its new path"
    return f"{kind} {name} {compact_json(result)}".strip()


#: What each kind of event is, in words, without its data.
WITHOUT_PAYLOAD = {
    "step": "step {name}",
    "wait": "waits on {target}",
    "sleep": "sleeps",
    "signal": "signal {name} received",
    "update": "update {name} applied",
    "update_wait": "update {name} taken by wait_for_update",
    "update_response": "answer to update {name}",
    "until": "wait_until",
    "child_start": "child started ({name})",
    "child_result": "child {name} finished",
    "patch": "patch {name}",
}


def describe_without_payload(event: WorkflowEvent) -> str:
    template = WITHOUT_PAYLOAD.get(event.kind, "{kind} {name}")
    text = template.format(
        kind=event.kind, name=event.name, target=event.name.replace(":", " ", 1)
    ).strip()
    return f"{text}: failed" if event.error is not None else text


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


def pending_for(run_id: str, *, using: str) -> dict[str, Any]:
    """Unconsumed signals and unanswered update requests (oldest first, bounded)."""
    signals = list(
        WorkflowSignal.objects.using(using)
        .filter(run_id=run_id, consumed_at__isnull=True)
        .order_by("id")[:PENDING_LIMIT]
    )
    updates = list(
        UpdateRequest.objects.using(using)
        .filter(run_id=run_id, status__in=[UpdateStatus.PENDING, UpdateStatus.DELIVERED])
        .order_by("id")[:PENDING_LIMIT]
    )
    return {"pending_signals": signals, "pending_updates": updates, "pending_limit": PENDING_LIMIT}


def lease_left(expires_at: datetime | None, now: datetime) -> float | None:
    return None if expires_at is None else (expires_at - now).total_seconds()
