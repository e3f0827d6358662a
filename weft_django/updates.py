"""Caller side of updates and queries: ``weft.update`` and ``weft.query``.

An update is stored as a request row (deduplicated by ``update_id``), with a
wake hint and a ``NOTIFY`` for the owner; the caller then waits for the
response the owner writes when it applies the request at the run's next park
point. Before storing, the caller replays the run read-only: if the handler
is already registered and its validator rejects the payload, the caller gets
``UpdateRejectedError`` and nothing is stored.

A timed-out caller gets ``UpdateTimeoutError``: the request stays stored and
may still be applied later; calling ``update`` again with the same
``update_id`` returns its result. Responses are kept
``WEFT["UPDATE_RESPONSE_TTL"]`` seconds, then deleted by the worker; after
that an old ``update_id`` is a new request.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.db import connections
from django.db.transaction import TransactionManagementError

from .exceptions import (
    QueryError,
    UpdateRejectedError,
    UpdateTimeoutError,
    WorkflowNotFoundError,
    WorkflowNotRegisteredError,
    WorkflowTerminalError,
)
from .messages import deliver
from .models import TERMINAL_STATUSES, UpdateRequest, UpdateStatus
from .ownership.clock import db_now
from .runtime.payload import encode
from .runtime.query import load_run, replay_read_only, run_query

USING = "default"


def _prevalidate(
    workflow_id: str, name: str, payload: Any, run: dict[str, Any], update_id: str | None
) -> None:
    """Run the handler's validator now if the run has registered it already."""
    try:
        ctx, _run = replay_read_only(workflow_id, using=USING, run=run)
    except (QueryError, WorkflowNotRegisteredError):
        return  # pending, not replayable here: validated at delivery
    handler = ctx._update_handlers.get(name)
    if handler is None or handler.validator is None:
        return
    try:
        with ctx.in_handler("update"):
            handler.validator(payload)
    except Exception as exc:
        # The same message as a rejection at delivery (Turn.drain_updates).
        raise UpdateRejectedError(update_id or "(not stored)", str(exc)) from None


def update(
    workflow_id: str,
    name: str,
    payload: Any = None,
    *,
    timeout: float = 30.0,
    update_id: str | None = None,
) -> Any:
    """Send an update into a running workflow and return its handler's result."""
    if not isinstance(name, str) or not name or len(name) > 255:
        raise ValueError("update name must be a non-empty string of at most 255 characters")
    if update_id is not None and (not isinstance(update_id, str) or not 0 < len(update_id) <= 255):
        raise ValueError("update_id must be a non-empty string of at most 255 characters")
    encoded = encode(payload, f"payload of update {name!r}")
    run = load_run(workflow_id, using=USING)  # also what the pre-validation replays
    if run is None:
        raise WorkflowNotFoundError(workflow_id)
    status = run["status"]
    existing = update_id is not None and (
        UpdateRequest.objects.using(USING).filter(run_id=workflow_id, update_id=update_id).exists()
    )
    if not existing:
        if status in TERMINAL_STATUSES:
            raise WorkflowTerminalError(workflow_id, status)
        _prevalidate(workflow_id, name, encoded, run, update_id)
        if timeout > 0 and connections[USING].in_atomic_block:
            raise TransactionManagementError(
                "weft.update() cannot wait for an answer inside transaction.atomic(): the "
                "workflow's owner sees the request only once this transaction commits, so "
                "the wait could only time out. Call it outside the atomic block (for a view "
                "under ATOMIC_REQUESTS, decorate it with @transaction.non_atomic_requests), "
                "or pass timeout=0 to store the request with this transaction and collect "
                "the answer later by calling update() again with its update_id."
            )
        update_id = update_id or uuid.uuid4().hex
        deliver(
            workflow_id,
            UpdateRequest(run_id=workflow_id, update_id=update_id, name=name, payload=encoded),
        )
    return wait_for_response(workflow_id, str(update_id), timeout=timeout)


# How often a caller re-reads its request while waiting for the answer: finely at
# first (with NOTIFY an owner answers within tens of milliseconds, without it
# within a fast tick), then backing off to bound the load of long waits.
POLL_FIRST = 0.002
POLL_GROWTH = 1.25
POLL_FINE_CAP = 0.01
POLL_FINE_FOR = 1.0
POLL_MAX = 0.1


def wait_for_response(workflow_id: str, update_id: str, *, timeout: float) -> Any:
    """Wait for the answer to a stored request; raise what ``update()`` raises."""
    began = time.monotonic()
    deadline = began + max(timeout, 0.0)
    delay = POLL_FIRST
    while True:
        row = (
            UpdateRequest.objects.using(USING)
            .filter(run_id=workflow_id, update_id=update_id)
            .values_list("status", "response", "error", "run__status")
            .first()
        )
        if row is None:
            raise WorkflowNotFoundError(workflow_id)
        status, response, error, run_status = row
        if status == UpdateStatus.APPLIED:
            return response
        if status in (UpdateStatus.REJECTED, UpdateStatus.FAILED):
            if (error or {}).get("type") == "WorkflowTerminal" and run_status in TERMINAL_STATUSES:
                # Never applied: the run ended first (Turn.finish refused it).
                raise WorkflowTerminalError(workflow_id, run_status)
            message = (error or {}).get("message", status)
            raise UpdateRejectedError(update_id, message)
        if run_status in TERMINAL_STATUSES:
            raise WorkflowTerminalError(workflow_id, run_status)
        now = time.monotonic()
        if now >= deadline:
            raise UpdateTimeoutError(update_id)
        time.sleep(min(delay, deadline - now))
        cap = POLL_FINE_CAP if now - began < POLL_FINE_FOR else POLL_MAX
        delay = min(delay * POLL_GROWTH, cap)


def query(workflow_id: str, name: str, *args: Any) -> Any:
    """Answer a query by replaying the run's history read-only, in this process."""
    try:
        return run_query(workflow_id, name, *args, using=USING)
    except WorkflowNotRegisteredError as exc:
        raise QueryError(f"Cannot answer {name!r} for {workflow_id!r}: {exc}") from exc


def purge_expired_updates(*, using: str = USING) -> int:
    """Delete answered requests whose response is past ``UPDATE_RESPONSE_TTL``."""
    now = db_now(using)
    deleted, _ = (
        UpdateRequest.objects.using(using)
        .exclude(status__in=(UpdateStatus.PENDING, UpdateStatus.DELIVERED))
        .filter(expires_at__lt=now)
        .delete()
    )
    return deleted
