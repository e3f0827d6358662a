"""Run rows: creating a run, and the transitions any process may commit on one.

Run creation is shared by ``weft.start`` and ``ctx.start_child``. ``cancel``,
``suspend``, ``purge`` and the execution timeout are committed by whichever
process asks, against a run it need not own: each rotates the claim's epoch
and drops its holder in the same transaction as the status write
(:func:`~weft_django.ownership.claims.revoke.revoke_statement`), so a still-running
owner's next fenced write fails and it stops that run. ``resume`` makes a
suspended run runnable again under a fresh epoch, its claim released free to
take by the release rule (:mod:`weft_django.ownership.claims.release`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from ..exceptions import (
    WorkflowBusyError,
    WorkflowClaimUnavailableError,
    WorkflowNotSuspendedError,
    WorkflowTerminalError,
)
from ..models import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    Claim,
    RunStatus,
    WorkflowEvent,
    WorkflowRun,
    db_for,
)
from ..ownership import (
    OPERATOR_LOCK_WAIT,
    DbNow,
    bounded_lock_wait,
    busy_as_typed_error,
    db_now,
    revoke_statement,
)
from .inbox import close_open_requests, status_of
from .registry import WorkflowDefinition
from .wakeups import notify

#: The run fields a turn (or a read-only replay) starts from.
RUN_FIELDS = (
    "id",
    "workflow_name",
    "workflow_version",
    "status",
    "args",
    "kwargs",
    "parent_id",
    "start_at",
    "timeout_at",
    "wake_hint_at",
    "queue",
    "concurrency_key",
)


def load_run(workflow_id: str, *, using: str | None = None) -> dict[str, Any] | None:
    """The :data:`RUN_FIELDS` of a run (None when there is no such run)."""
    return (
        WorkflowRun.objects.using(db_for(using)).filter(pk=workflow_id).values(*RUN_FIELDS).first()
    )


def new_run(
    definition: WorkflowDefinition,
    workflow_id: str,
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    parent_id: str = "",
    start_at: datetime | None = None,
    now: datetime | None = None,
    using: str | None = None,
    flow: Flow | None = None,
) -> WorkflowRun:
    """Insert a pending run (IntegrityError when the id exists).

    The database clock is read only when a start time or an execution timeout
    needs it; otherwise the INSERT stamps the row with the database's own now.
    """
    run = _pending_run(definition, workflow_id, args, kwargs, parent_id, start_at, now, using)
    _set_flow(run, definition, flow)
    run.save(using=db_for(using), force_insert=True)
    return run


#: MySQL/MariaDB's error number of a duplicate key; PostgreSQL's SQLSTATE of one.
MYSQL_DUPLICATE_KEY = 1062
PG_UNIQUE_VIOLATION = "23505"


def is_duplicate_key(error: IntegrityError) -> bool:
    """Whether ``error`` is a unique-key violation (the id exists), not another
    refusal: a CHECK constraint (MariaDB's ``JSON_VALID`` on a JSON column,
    error 4025), a foreign key, a NOT NULL. Only a duplicate may be reported as
    ``WorkflowAlreadyExistsError``; anything else is the caller's to see."""
    # Django's MySQL backend raises a CHECK failure (reported by the driver as an
    # OperationalError) as a new IntegrityError: the driver's error is its context.
    cause = error.__cause__ or error.__context__
    module = type(cause).__module__ if cause is not None else ""
    if cause is not None and module.startswith("MySQLdb"):
        return bool(cause.args) and cause.args[0] == MYSQL_DUPLICATE_KEY
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if state is not None:
        return bool(state == PG_UNIQUE_VIOLATION)
    if module.startswith("sqlite3"):
        return str(error).startswith("UNIQUE constraint failed")
    return True  # a backend weft does not know: a duplicate, as it most often is


@dataclass(frozen=True)
class Flow:
    """A new run's flow control (docs/flow-control.md), already checked."""

    queue: str = "default"
    priority: int = 0
    concurrency_key: str | None = None


def _set_flow(run: WorkflowRun, definition: WorkflowDefinition, flow: Flow | None) -> None:
    """The run's queue, priority and key: ``flow``, else its workflow's queue."""
    if flow is None:
        flow = Flow(queue=definition.queue or "default")
    run.queue, run.priority, run.concurrency_key = flow.queue, flow.priority, flow.concurrency_key


def _pending_run(
    definition: WorkflowDefinition,
    workflow_id: str,
    args: list[Any],
    kwargs: dict[str, Any],
    parent_id: str,
    start_at: datetime | None,
    now: datetime | None,
    using: str | None,
) -> WorkflowRun:
    using = db_for(using)
    if now is None and (start_at is not None or definition.timeout is not None):
        now = db_now(using)
    stamp: datetime | DbNow = now if now is not None else DbNow()
    scheduled = start_at is not None and now is not None and start_at > now
    timeout_at = None
    if definition.timeout is not None and now is not None:
        begins = start_at if scheduled and start_at is not None else now
        timeout_at = begins + timedelta(seconds=definition.timeout)
    return WorkflowRun(
        id=workflow_id,
        workflow_name=definition.name,
        workflow_version=definition.version,
        status=RunStatus.PENDING,
        args=args,
        kwargs=kwargs,
        parent_id=parent_id,
        created_at=stamp,
        updated_at=stamp,
        start_at=start_at,
        wake_at=start_at if scheduled else None,
        timeout_at=timeout_at,
    )


def ending_fields(
    status: str, now: datetime, *, result: Any = None, error: Any = None
) -> dict[str, Any]:
    """The run row's fields when it leaves the active states (terminal or suspended)."""
    return {
        "status": status,
        "result": result,
        "error": error,
        "waiting_on": None,
        "wake_at": None,
        "wake_hint_at": None,
        "updated_at": now,
        "finished_at": now if status in TERMINAL_STATUSES else None,
    }


def close_run(workflow_id: str, status: str, *, now: datetime, parent_id: str, using: str) -> None:
    """What ending a run commits besides its row, in the same transaction: its open
    update requests answered, its parent woken (a hint now, ``NOTIFY`` on commit)."""
    if status not in TERMINAL_STATUSES:
        return
    close_open_requests(workflow_id, status, now=now, using=using)
    if parent_id:
        WorkflowRun.objects.using(using).filter(pk=parent_id).update(wake_hint_at=now)
        notify(parent_id, using=using)


@contextmanager
def _operator_transaction(workflow_id: str, using: str) -> Iterator[None]:
    """A transaction of a process that does not own the run: its lock waits are
    bounded, and a run locked by its owner's open transaction is
    ``WorkflowBusyError`` (nothing changed) rather than an unbounded wait."""
    with (
        busy_as_typed_error(workflow_id),
        transaction.atomic(using=using),
        bounded_lock_wait(using, OPERATOR_LOCK_WAIT),
    ):
        yield


#: The statuses each external transition may leave.
TRANSITIONS_FROM = {
    RunStatus.CANCELLED: (*ACTIVE_STATUSES, RunStatus.SUSPENDED),
    RunStatus.SUSPENDED: ACTIVE_STATUSES,
    RunStatus.TIMED_OUT: ACTIVE_STATUSES,
}


#: A callable run inside an operator's transaction once its change is made (the
#: audit record of :mod:`weft_django.operations`): if it raises, nothing is changed.
Within = Callable[[], None]


def transition(
    workflow_id: str,
    status: RunStatus,
    *,
    message: str | None = None,
    within: Within | None = None,
    using: str | None = None,
) -> None:
    """Commit ``status`` (cancelled, suspended, timed_out) for a run from any process.

    ``message`` is the recorded error message of a cancelled or suspended run
    (default: ``"cancelled by an operator"``, and none for suspended). ``within``
    runs in the same transaction after the change. ``WorkflowTerminalError``
    when the run's current status does not allow it.
    """
    using = db_for(using)
    with _operator_transaction(workflow_id, using):
        # Claim first, run row second: an owner's fenced checkpoint holds its claim
        # row (FOR SHARE on PostgreSQL) and then writes the run row, so taking them
        # in the other order deadlocks with it. This way we queue behind it.
        revoke_statement(using, workflow_id)
        now = db_now(using)
        error = None
        if status == RunStatus.CANCELLED:
            error = {"type": status.title(), "message": message or f"{status} by an operator"}
        elif message and status == RunStatus.SUSPENDED:
            error = {"type": status.title(), "message": message}
        changed = (
            WorkflowRun.objects.using(using)
            .filter(pk=workflow_id, status__in=TRANSITIONS_FROM[status])
            .update(**ending_fields(status, now, error=error))
        )
        if changed != 1:
            raise WorkflowTerminalError(
                workflow_id, status_of(workflow_id, using=using), wanted=status
            )
        parent_id = (
            WorkflowRun.objects.using(using)
            .filter(pk=workflow_id)
            .values_list("parent_id", flat=True)
            .first()
        )
        close_run(workflow_id, status, now=now, parent_id=parent_id or "", using=using)
        if within is not None:
            within()


def resume_run(workflow_id: str, *, within: Within | None = None, using: str | None = None) -> None:
    """Make a suspended run runnable again under a fresh claim epoch.

    ``WorkflowNotSuspendedError`` when it is not suspended;
    ``WorkflowClaimUnavailableError`` if a live engine holds the claim.
    ``within`` runs in the same transaction after the change.
    """
    using = db_for(using)
    with _operator_transaction(workflow_id, using):
        now = db_now(using)
        holder = (
            Claim.objects.using(using)
            .filter(workflow_id=workflow_id, holder__isnull=False)
            .values_list("holder_id", flat=True)
            .first()
        )
        status = status_of(workflow_id, using=using)
        if status != RunStatus.SUSPENDED:
            raise WorkflowNotSuspendedError(workflow_id, status)
        if holder is not None:
            raise WorkflowClaimUnavailableError(workflow_id, holder)
        started = WorkflowEvent.objects.using(using).filter(run_id=workflow_id).exists()
        WorkflowRun.objects.using(using).filter(pk=workflow_id, status=RunStatus.SUSPENDED).update(
            status=RunStatus.WAITING if started else RunStatus.PENDING,
            error=None,
            updated_at=now,
            wake_at=now,
            wake_hint_at=now,
        )
        # Active again: the claim is released stamped (the release rule), so the
        # reclaim pass of every worker finds it, and the wake hint makes it due
        # for the next fast tick (at once with NOTIFY) of any of them.
        revoke_statement(using, workflow_id, ended=False)
        notify(workflow_id, using=using)
        if within is not None:
            within()


def purge_run(workflow_id: str, *, within: Within | None = None, using: str | None = None) -> None:
    """Delete a run and its history; its claim epoch is rotated, never reset.
    ``within`` runs in the same transaction after the delete."""
    using = db_for(using)
    with _operator_transaction(workflow_id, using):
        status_of(workflow_id, using=using)
        revoke_statement(using, workflow_id)
        WorkflowRun.objects.using(using).filter(pk=workflow_id).delete()
        if within is not None:
            within()


def expire_timed_out(*, limit: int = 500, using: str | None = None) -> list[str]:
    """Commit ``timed_out`` for active runs past their execution timeout (any process)."""
    using = db_for(using)
    now = db_now(using)
    candidates = list(
        WorkflowRun.objects.using(using)
        .filter(status__in=ACTIVE_STATUSES)
        .filter(timeout_at__isnull=False, timeout_at__lte=now)
        .values_list("pk", flat=True)[:limit]
    )
    expired: list[str] = []
    for workflow_id in candidates:
        try:
            transition(workflow_id, RunStatus.TIMED_OUT, using=using)
        except (WorkflowTerminalError, WorkflowBusyError):
            continue  # finished meanwhile, or locked by its owner: the next pass retries
        expired.append(workflow_id)
    return expired
