"""A run's inbox: storing signals and update requests, closing them at the end.

Shared by the public verbs (``weft.signal``, ``weft.update``), operator
transitions and the terminal commit, so every path leaves the same wake hint
and gives the same answers.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import DatabaseError, connections, transaction
from django.db.models import Model

from ..conf import get_settings
from ..exceptions import WorkflowNotFoundError, WorkflowTerminalError
from ..models import TERMINAL_STATUSES, UpdateRequest, UpdateStatus, WorkflowRun, db_for
from ..ownership import db_now
from .backoff import is_retryable_conflict
from .wakeups import notify

#: How many times ``deliver`` runs its transaction when it ends in a deadlock.
DELIVER_ATTEMPTS = 4


def status_of(workflow_id: str, *, using: str | None = None) -> str:
    """The run's status; ``WorkflowNotFoundError`` when there is no such run."""
    status = (
        WorkflowRun.objects.using(db_for(using))
        .filter(pk=workflow_id)
        .values_list("status", flat=True)
        .first()
    )
    if status is None:
        raise WorkflowNotFoundError(workflow_id)
    return status


def deliver(
    workflow_id: str,
    row: Model,
    *,
    within: Callable[[], None] | None = None,
    using: str | None = None,
) -> None:
    """Store ``row`` (a signal or an update request) for a non-terminal run.

    One transaction: leave a wake hint on the run (raising ``WorkflowNotFoundError``
    or ``WorkflowTerminalError`` when it is missing or finished), insert the row
    unless its id exists already (idempotent ids), ``NOTIFY`` the owner on commit;
    ``within`` runs last in that transaction.
    """
    using = db_for(using)
    # A deadlock with the owner's turn (MariaDB: the run row and the request
    # index, locked in the other order) rolled everything back: run it again.
    # Inside a caller's transaction that is the caller's to retry.
    attempts = 1 if connections[using].in_atomic_block else DELIVER_ATTEMPTS
    for attempt in range(1, attempts + 1):
        try:
            _deliver_once(workflow_id, row, using, within)
            return
        except DatabaseError as exc:
            if attempt == attempts or not is_retryable_conflict(exc):
                raise
            time.sleep(random.uniform(0.005, 0.02) * attempt)


def _deliver_once(
    workflow_id: str, row: Model, using: str, within: Callable[[], None] | None
) -> None:
    with transaction.atomic(using=using):
        now = db_now(using)
        hinted = (
            WorkflowRun.objects.using(using)
            .filter(pk=workflow_id)
            .exclude(status__in=TERMINAL_STATUSES)
            .update(wake_hint_at=now)
        )
        if hinted != 1:
            raise WorkflowTerminalError(workflow_id, status_of(workflow_id, using=using))
        # Both row types (WorkflowSignal, UpdateRequest) have created_at; Model does not.
        row.created_at = now  # type: ignore[attr-defined]
        type(row)._default_manager.using(using).bulk_create([row], ignore_conflicts=True)
        notify(workflow_id, using=using)
        if within is not None:
            within()


def close_open_requests(
    run_id: str, status: str, *, now: datetime, using: str | None = None
) -> int:
    """Answer a finished run's pending (or delivered) requests: rejected, with the
    run's status, kept until the response TTL. Call it in the terminal commit."""
    return (
        UpdateRequest.objects.using(db_for(using))
        .filter(run_id=run_id, status__in=(UpdateStatus.PENDING, UpdateStatus.DELIVERED))
        .update(
            status=UpdateStatus.REJECTED,
            error={"type": "WorkflowTerminal", "message": f"the run is {status}"},
            responded_at=now,
            expires_at=now + timedelta(seconds=get_settings().update_response_ttl),
        )
    )


def purge_expired_updates(*, using: str | None = None) -> int:
    """Delete answered requests whose response is past ``UPDATE_RESPONSE_TTL``."""
    using = db_for(using)
    deleted, _ = (
        UpdateRequest.objects.using(using)
        .exclude(status__in=(UpdateStatus.PENDING, UpdateStatus.DELIVERED))
        .filter(expires_at__lt=db_now(using))
        .delete()
    )
    return deleted
