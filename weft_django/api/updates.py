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

import uuid
from typing import Any

from django.db import connections
from django.db.transaction import TransactionManagementError

from ..exceptions import (
    QueryError,
    UpdateRejectedError,
    UpdateTimeoutError,
    WorkflowNotFoundError,
    WorkflowNotRegisteredError,
    WorkflowTerminalError,
)
from ..models import TERMINAL_STATUSES, UpdateRequest, UpdateStatus, db_for
from ..ownership import busy_as_typed_error
from ..runtime.inbox import deliver
from ..runtime.payload import UPDATE_ID, UPDATE_NAME, check_id, encode
from ..runtime.polling import NOT_YET, UPDATE_BACKOFF, Poll, check_timeout
from ..runtime.query import prevalidate_update, run_query
from ..runtime.runs import load_run


def update(
    workflow_id: str,
    name: str,
    payload: Any = None,
    *,
    timeout: float | None = 30.0,
    update_id: str | None = None,
    using: str | None = None,
) -> Any:
    """Send an update into a running workflow and return its handler's result.

    ``timeout`` is how long to wait for the answer (None: as long as it takes).
    Past it, ``UpdateTimeoutError``: the request stays stored and its
    ``update_id`` collects the answer later. ``timeout=0`` stores the request
    and looks for the answer once: it returns the answer when there is one
    (a repeated ``update_id``), else raises ``UpdateTimeoutError`` at once.
    Inside ``transaction.atomic()`` only ``timeout=0`` is allowed for a new
    request, and its ``UpdateTimeoutError`` must be caught inside the block, or
    the block rolls back and the request with it.
    """
    check_id(workflow_id)
    check_id(name, "update name", UPDATE_NAME)
    if update_id is not None:
        check_id(update_id, "update_id", UPDATE_ID)
    using = db_for(using)
    timeout = check_timeout(timeout)
    encoded = encode(payload, f"payload of update {name!r}")
    run = load_run(workflow_id, using=using)  # also what the pre-validation replays
    if run is None:
        raise WorkflowNotFoundError(workflow_id)
    status = run["status"]
    existing = update_id is not None and (
        UpdateRequest.objects.using(using).filter(run_id=workflow_id, update_id=update_id).exists()
    )
    if not existing:
        if status in TERMINAL_STATUSES:
            raise WorkflowTerminalError(workflow_id, status)
        prevalidate_update(run, name, encoded, update_id, using=using)
        if (timeout is None or timeout > 0) and connections[using].in_atomic_block:
            raise TransactionManagementError(
                "weft.update() cannot wait for an answer inside transaction.atomic(): the "
                "workflow's owner sees the request only once this transaction commits, so "
                "the wait could only time out. Call it outside the atomic block (for a view "
                "under ATOMIC_REQUESTS, decorate it with @transaction.non_atomic_requests), "
                "or pass timeout=0 to store the request with this transaction: it raises "
                "UpdateTimeoutError at once, which you catch inside the atomic block (else "
                "the block rolls back, the request with it); its update_id collects the "
                "answer later, by calling update() again outside the transaction."
            )
        update_id = update_id or uuid.uuid4().hex
        with busy_as_typed_error():
            deliver(
                workflow_id,
                UpdateRequest(run_id=workflow_id, update_id=update_id, name=name, payload=encoded),
                using=using,
            )
    return wait_for_response(workflow_id, str(update_id), timeout=timeout, using=using)


def wait_for_response(
    workflow_id: str, update_id: str, *, timeout: float | None, using: str | None = None
) -> Any:
    """Wait for the answer to a stored request; raise what ``update()`` raises."""
    requests = UpdateRequest.objects.using(db_for(using))

    def check() -> Any:
        row = (
            requests.filter(run_id=workflow_id, update_id=update_id)
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
                # Never applied: the run ended first (its terminal commit refused it).
                raise WorkflowTerminalError(workflow_id, run_status)
            if status == UpdateStatus.FAILED:  # applied, and its handler raised
                raise UpdateRejectedError(update_id, _describe(error), status=status)
            raise UpdateRejectedError(update_id, (error or {}).get("message", status))
        if run_status in TERMINAL_STATUSES:
            raise WorkflowTerminalError(workflow_id, run_status)
        return NOT_YET

    wait = None if timeout is None else max(timeout, 0.0)
    poll: Poll[Any] = Poll(check, timeout=wait, backoff=UPDATE_BACKOFF)
    return poll.wait(lambda: UpdateTimeoutError(update_id))


def _describe(error: dict[str, Any] | None) -> str:
    """A handler's stored exception as ``Type: message``."""
    error = error or {}
    kind = str(error.get("type") or "Error")
    message = str(error.get("message") or "")
    return f"{kind}: {message}" if message else kind


def query(workflow_id: str, name: str, *args: Any, using: str | None = None) -> Any:
    """Answer a query by replaying the run's history read-only, in this process."""
    check_id(workflow_id)
    check_id(name, "query name", UPDATE_NAME)
    try:
        return run_query(workflow_id, name, *args, using=using)
    except WorkflowNotRegisteredError as exc:
        raise QueryError(f"Cannot answer {name!r} for {workflow_id!r}: {exc}") from exc
