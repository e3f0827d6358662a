"""A run's history in words, and what is pending for it: the admin's run page
(its timeline, :mod:`weft_django.admin.timeline`) and ``manage.py weft
describe`` / ``history``.

:func:`describe` says what one recorded event is (a step and its result, a
wait and what it waits on, a signal consumed, an update applied or answered,
a child started or finished); without payloads it leaves the data out.
:func:`pending_for` reads the unconsumed signals and unanswered update
requests of a run, oldest first, bounded.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import UpdateRequest, UpdateStatus, WorkflowEvent, WorkflowSignal

PENDING_LIMIT = 100


def compact_json(value: Any, limit: int = 80) -> str:
    """``value`` as short JSON for one line (a ``waiting_on`` as ``kind: name``),
    cut at ``limit`` characters."""
    if value is None:
        return "-"
    if isinstance(value, dict) and "kind" in value:
        detail = value.get("name") or value.get("until") or ""
        text = f"{value['kind']}: {detail}" if detail else str(value["kind"])
    else:
        text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


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


__all__ = [
    "PENDING_LIMIT",
    "WITHOUT_PAYLOAD",
    "compact_json",
    "describe",
    "describe_without_payload",
    "pending_for",
]
