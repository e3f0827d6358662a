"""The read verbs, from any process: ``result`` (wait for a run's outcome) and
``describe`` (what a run is doing now). Neither writes nor locks anything."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Count, Q
from django.db.transaction import TransactionManagementError

from ..exceptions import (
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowNotFoundError,
)
from ..models import Claim, RunStatus, UpdateStatus, WorkflowRun, db_for
from ..runtime.payload import check_id
from ..runtime.polling import NOT_YET, RESULT_BACKOFF, Poll, check_timeout


def result(workflow_id: str, timeout: float | None = None, *, using: str | None = None) -> Any:
    """Block until the run is terminal; return its result or raise its failure.

    ``timeout`` is how long to wait (None: as long as it takes; 0: look once);
    past it, ``TimeoutError``. A cancelled run raises ``WorkflowCancelledError``,
    a failed or timed-out one ``WorkflowFailedError``. Inside
    ``transaction.atomic()`` a run that is not finished yet raises
    ``TransactionManagementError`` at once (unless ``timeout=0``): the wait
    could only time out, as for ``update()``. ``WorkflowNotFoundError`` when there
    is no such run (or it is purged while the caller waits).
    """
    check_id(workflow_id)
    alias = db_for(using)
    runs = WorkflowRun.objects.using(alias)
    timeout = check_timeout(timeout)
    last_status = ""

    def check() -> Any:
        nonlocal last_status
        row = runs.filter(pk=workflow_id).values_list("status", "result", "error").first()
        if row is None:
            raise WorkflowNotFoundError(workflow_id)
        status, value, error = row
        if status == RunStatus.COMPLETED:
            return value
        if status == RunStatus.CANCELLED:
            raise WorkflowCancelledError(workflow_id)
        if status in (RunStatus.FAILED, RunStatus.TIMED_OUT):
            raise WorkflowFailedError(workflow_id, error or {"type": status}, status=status)
        last_status = status
        return NOT_YET

    if (timeout is None or timeout > 0) and connections[alias].in_atomic_block:
        answer = check()
        if answer is not NOT_YET:
            return answer
        raise TransactionManagementError(
            f"weft.result() cannot wait for workflow run {workflow_id!r} (still "
            f"{last_status}) inside transaction.atomic(): this transaction may hold what "
            "the run needs (its start, a signal) and, depending on the database's "
            "isolation level, may never see the run finish, so the wait could only time "
            "out. Call it outside the atomic block (for a view under ATOMIC_REQUESTS, "
            "decorate it with @transaction.non_atomic_requests), or pass timeout=0 to "
            "look once."
        )
    poll: Poll[Any] = Poll(check, timeout=timeout, backoff=RESULT_BACKOFF)
    return poll.wait(
        lambda: TimeoutError(
            f"Workflow run {workflow_id!r} is still {last_status} after the {timeout:g} s "
            "timeout; call result() again to wait longer."
        )
    )


@dataclass(frozen=True)
class WorkflowDescription:
    """A snapshot of one run, as :func:`describe` read it (frozen; never refreshed)."""

    workflow_id: str
    """The run's id."""
    workflow_name: str
    """The registered name of its workflow."""
    workflow_version: int
    """The ``version`` the workflow had when the run started."""
    status: str
    """``pending``, ``running``, ``waiting``, ``suspended``, ``completed``,
    ``failed``, ``cancelled`` or ``timed_out``."""
    owner_engine_id: str | None
    """The engine holding the run's claim; None when no engine holds it."""
    owner_hostname: str | None
    """The host of that engine; None when no engine holds the claim."""
    epoch: int
    """The claim's epoch (0 when the run has no claim row yet); it rises with
    every claim, takeover, cancel, suspend, resume and purge."""
    claim_expires_at: datetime | None
    """When the holding engine's lease expires unless renewed; None when no engine
    holds the claim."""
    waiting_on: dict[str, Any] | None
    """What a waiting run is parked on, e.g. ``{"kind": "signal", "name": ...}``
    (kinds ``sleep``, ``signal``, ``update``, ``until``, ``child``); None otherwise."""
    wake_at: datetime | None
    """When a parked run's timer or wait deadline is due; None when there is none."""
    pending_signals: int
    """Signals stored and not consumed yet."""
    pending_updates: int
    """Update requests stored and not answered yet."""
    parent_id: str
    """The id of the run that started this one with ``ctx.start_child``; ``""``
    for a top-level run."""
    created_at: datetime
    """When the run was stored."""
    updated_at: datetime
    """When the run's row last changed."""
    result: Any
    """The workflow's return value once ``completed``; None otherwise."""
    error: dict[str, Any] | None
    """What a failed, timed-out, cancelled or suspended run recorded (``type``,
    ``message``); None otherwise."""


def describe(workflow_id: str, *, using: str | None = None) -> WorkflowDescription:
    """What a run is doing now, from any process: a :class:`WorkflowDescription`.

    Two reads (the run with its pending signal and update counts, then its
    claim), not one snapshot: a run that moves in between may show an owner or
    epoch one step newer than its status. Nothing is locked or written.
    ``WorkflowNotFoundError`` when there is no such run.
    """
    check_id(workflow_id)
    using = db_for(using)
    run = (
        WorkflowRun.objects.using(using)
        .filter(pk=workflow_id)
        .annotate(
            pending_signals=Count(
                "signals", filter=Q(signals__consumed_at__isnull=True), distinct=True
            ),
            pending_updates=Count(
                "updates", filter=Q(updates__status=UpdateStatus.PENDING), distinct=True
            ),
        )
        .first()
    )
    if run is None:
        raise WorkflowNotFoundError(workflow_id)
    claim = (
        Claim.objects.using(using)
        .filter(workflow_id=workflow_id)
        .values_list("epoch", "holder_id", "holder__hostname", "holder__lease_expires_at")
        .first()
    )
    epoch, holder, hostname, expires = claim if claim else (0, None, None, None)
    return WorkflowDescription(
        workflow_id=run.pk,
        workflow_name=run.workflow_name,
        workflow_version=run.workflow_version,
        status=run.status,
        owner_engine_id=holder,
        owner_hostname=hostname,
        epoch=epoch,
        claim_expires_at=expires,
        waiting_on=run.waiting_on,
        wake_at=run.wake_at,
        pending_signals=run.pending_signals,
        pending_updates=run.pending_updates,
        parent_id=run.parent_id,
        created_at=run.created_at,
        updated_at=run.updated_at,
        result=run.result,
        error=run.error,
    )


__all__ = ["WorkflowDescription", "describe", "result"]
