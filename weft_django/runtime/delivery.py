"""Update delivery: which pending update requests a run applies at a park point.

The policy (the workflow side of updates) decides; the turn only writes.
Requests are taken in arrival order: a request with a registered handler is
validated, applied and answered, each in one fenced write with its
``update`` history event; a request nobody handles is rejected, unless a
``wait_for_update`` in progress waits for that name (then delivery stops
there: the waiter takes it, later ones wait for the next park point).
Delivery also stops after the first applied request that makes the
``wait_until`` predicate in progress true.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import PayloadError
from .payload import check_decoded, encode, error_info
from .port import Event, TurnPort
from .replay import Replay


def deliver_updates(replay: Replay, turn: TurnPort) -> int:
    """Apply ``turn``'s pending update requests; returns how many were applied."""
    applied = 0
    for request in turn.pending_updates():
        try:  # a payload stored before the depth limit, or by hand
            check_decoded(request.payload, f"payload of update {request.name!r}")
        except PayloadError as exc:
            turn.reject_update(request.pk, type(exc).__name__, str(exc))
            continue
        handler = replay.update_handlers.get(request.name)
        if handler is None:
            if request.name == replay.waiting_update:
                break  # the wait_for_update in progress takes it, in order
            turn.reject_update(
                request.pk,
                "UnknownUpdate",
                f"run {turn.run_id!r} has no handler for update {request.name!r} and is "
                "not waiting for it",
            )
            continue
        if handler.validator is not None:
            try:
                with replay.in_handler("update"):
                    handler.validator(request.payload)
            except Exception as exc:
                turn.reject_update(request.pk, type(exc).__name__, str(exc))
                continue
        response: Any = None
        error: dict[str, Any] | None = None
        try:
            with replay.in_handler("update"):
                raw = handler.fn(request.payload)
            response = encode(raw, f"response to update {request.name!r}")
        except Exception as exc:
            error = error_info(exc, with_traceback=False)
        event = Event(
            replay.next_seq,
            "update",
            request.name,
            {"update_id": request.update_id, "payload": request.payload, "response": response},
            error,
        )
        pending = replay.pending()
        turn.apply_update(request.pk, pending, event)
        replay.committed([*pending, event])
        applied += 1
        if replay.until is not None and replay.until():
            break
    return applied
