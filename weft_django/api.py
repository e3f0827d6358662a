"""The public verbs (DESIGN.md §2), callable from any process: views, shell, Celery.

None of these needs to own the run. ``cancel``, ``suspend`` and ``purge``
rotate the claim's epoch and drop its holder in the same transaction as the
status write, so a still-running owner's next fenced write fails and it
stops that run (DESIGN.md §4.5).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Count, Q
from django.db.models.functions import Now

from .exceptions import (
    WorkflowAlreadyExistsError,
    WorkflowCancelledError,
    WorkflowClaimUnavailableError,
    WorkflowFailedError,
    WorkflowNotFoundError,
    WorkflowTerminalError,
)
from .messages import close_open_requests, deliver, status_of
from .models import (
    TERMINAL_STATUSES,
    Claim,
    RunStatus,
    UpdateStatus,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from .notify import notify
from .ownership.claims import revoke_statement
from .ownership.clock import db_now
from .runtime import registry
from .runtime.payload import encode, encode_call
from .runtime.registry import WorkflowDefinition

USING = "default"
MAX_ID_LENGTH = 255


def _check_id(workflow_id: Any, what: str = "workflow_id") -> str:
    if not isinstance(workflow_id, str) or not workflow_id or len(workflow_id) > MAX_ID_LENGTH:
        raise ValueError(f"{what} must be a non-empty string of at most {MAX_ID_LENGTH} characters")
    return workflow_id


def new_run(
    definition: WorkflowDefinition,
    workflow_id: str,
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    parent_id: str = "",
    start_at: datetime | None = None,
    now: datetime | None = None,
    using: str = USING,
) -> WorkflowRun:
    """Insert a pending run (IntegrityError when the id exists).

    The database clock is read only when a start time or an execution timeout
    needs it; otherwise the INSERT stamps the row with the database's own now.
    """
    if now is None and (start_at is not None or definition.timeout is not None):
        now = db_now(using)
    stamp: datetime | Now = now if now is not None else Now()
    scheduled = start_at is not None and now is not None and start_at > now
    timeout_at = None
    if definition.timeout is not None and now is not None:
        begins = start_at if scheduled and start_at is not None else now
        timeout_at = begins + timedelta(seconds=definition.timeout)
    return WorkflowRun.objects.using(using).create(
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


def start(
    workflow: str | Callable[..., Any],
    *args: Any,
    workflow_id: str | None = None,
    start_at: datetime | None = None,
    **kwargs: Any,
) -> WorkflowHandle:
    """Start a run of a registered workflow; returns once the run is stored."""
    definition = registry.resolve(workflow)
    workflow_id = _check_id(workflow_id) if workflow_id is not None else uuid.uuid4().hex
    encoded_args, encoded_kwargs = encode_call(args, kwargs, f"workflow {definition.name!r}")
    try:
        if connections[USING].in_atomic_block:
            # A savepoint, so a duplicate id does not break the caller's transaction.
            with transaction.atomic(using=USING):
                new_run(definition, workflow_id, encoded_args, encoded_kwargs, start_at=start_at)
        else:  # autocommit: the single INSERT is atomic by itself
            new_run(definition, workflow_id, encoded_args, encoded_kwargs, start_at=start_at)
    except IntegrityError:
        raise WorkflowAlreadyExistsError(workflow_id) from None
    notify(workflow_id)
    return WorkflowHandle(workflow_id)


def get_handle(workflow_id: str) -> WorkflowHandle:
    if not WorkflowRun.objects.using(USING).filter(pk=workflow_id).exists():
        raise WorkflowNotFoundError(workflow_id)
    return WorkflowHandle(workflow_id)


def signal(
    workflow_id: str, name: str, payload: Any = None, *, signal_id: str | None = None
) -> None:
    """Durably buffer a signal; a repeated ``signal_id`` is a no-op."""
    _check_id(workflow_id)
    _check_id(name, "signal name")
    encoded = encode(payload, f"payload of signal {name!r}")
    if signal_id is not None:
        _check_id(signal_id, "signal_id")
        # A repeat is a no-op: no second row, and no wake hint that would cost
        # the owner a pointless turn (an idempotent retry after the run ended
        # also succeeds, as the first call did).
        if WorkflowSignal.objects.using(USING).filter(
            run_id=workflow_id, signal_id=signal_id
        ).exists():
            return
    else:
        signal_id = uuid.uuid4().hex
    deliver(
        workflow_id,
        WorkflowSignal(run_id=workflow_id, signal_id=signal_id, name=name, payload=encoded),
    )


def _external_transition(workflow_id: str, status: str, *, allowed: tuple[str, ...]) -> None:
    with transaction.atomic(using=USING):
        # Claim first, run row second: an owner's fenced checkpoint holds its claim
        # row (FOR SHARE on PostgreSQL) and then writes the run row, so taking them
        # in the other order deadlocks with it. This way we queue behind it.
        revoke_statement(USING, workflow_id)
        now = db_now(USING)
        changed = (
            WorkflowRun.objects.using(USING)
            .filter(pk=workflow_id, status__in=allowed)
            .update(
                status=status,
                updated_at=now,
                waiting_on=None,
                wake_at=None,
                wake_hint_at=None,
                finished_at=now if status in TERMINAL_STATUSES else None,
                error={"type": status.title(), "message": f"{status} by an operator"}
                if status == RunStatus.CANCELLED
                else None,
            )
        )
        if changed != 1:
            raise WorkflowTerminalError(workflow_id, status_of(workflow_id))
        if status in TERMINAL_STATUSES:
            close_open_requests(workflow_id, status, now=now, using=USING)
        parent_id = (
            WorkflowRun.objects.using(USING)
            .filter(pk=workflow_id)
            .values_list("parent_id", flat=True)
            .first()
        )
        if parent_id and status in TERMINAL_STATUSES:
            WorkflowRun.objects.using(USING).filter(pk=parent_id).update(wake_hint_at=now)
            notify(parent_id)


def cancel(workflow_id: str) -> None:
    """Cancel a run from any process: epoch rotated, holder dropped, status cancelled."""
    _external_transition(
        workflow_id,
        RunStatus.CANCELLED,
        allowed=(RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING, RunStatus.SUSPENDED),
    )


def suspend(workflow_id: str) -> None:
    """Suspend a run: it stops on its owner and stays put until ``resume``."""
    _external_transition(
        workflow_id,
        RunStatus.SUSPENDED,
        allowed=(RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING),
    )


def resume(workflow_id: str) -> None:
    """Make a suspended run runnable again under a fresh claim epoch.

    Raises ``WorkflowClaimUnavailableError`` if a live engine holds the claim.
    """
    with transaction.atomic(using=USING):
        now = db_now(USING)
        holder = (
            Claim.objects.using(USING)
            .filter(workflow_id=workflow_id, holder__isnull=False)
            .values_list("holder_id", flat=True)
            .first()
        )
        status = status_of(workflow_id)
        if status != RunStatus.SUSPENDED:
            raise WorkflowTerminalError(workflow_id, status)
        if holder is not None:
            raise WorkflowClaimUnavailableError(workflow_id, holder)
        started = WorkflowEvent.objects.using(USING).filter(run_id=workflow_id).exists()
        WorkflowRun.objects.using(USING).filter(pk=workflow_id, status=RunStatus.SUSPENDED).update(
            status=RunStatus.WAITING if started else RunStatus.PENDING,
            error=None,
            updated_at=now,
            wake_at=now,
            wake_hint_at=now,
        )
        revoke_statement(USING, workflow_id)
        notify(workflow_id)


def purge(workflow_id: str) -> None:
    """Delete a run and its history; its claim epoch is rotated, never reset."""
    with transaction.atomic(using=USING):
        status_of(workflow_id)
        revoke_statement(USING, workflow_id)
        WorkflowRun.objects.using(USING).filter(pk=workflow_id).delete()


def expire_timed_out(limit: int = 500) -> list[str]:
    """Commit ``timed_out`` for active runs past their execution timeout (any process)."""
    now = db_now(USING)
    expired: list[str] = []
    candidates = list(
        WorkflowRun.objects.using(USING)
        .filter(status__in=(RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING))
        .filter(timeout_at__isnull=False, timeout_at__lte=now)
        .values_list("pk", flat=True)[:limit]
    )
    for workflow_id in candidates:
        try:
            _external_transition(
                workflow_id,
                RunStatus.TIMED_OUT,
                allowed=(RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING),
            )
        except WorkflowTerminalError:
            continue
        expired.append(workflow_id)
    return expired


def result(workflow_id: str, timeout: float | None = None) -> Any:
    """Block until the run is terminal; return its result or raise its failure."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.02
    while True:
        row = (
            WorkflowRun.objects.using(USING)
            .filter(pk=workflow_id)
            .values_list("status", "result", "error")
            .first()
        )
        if row is None:
            raise WorkflowNotFoundError(workflow_id)
        status, value, error = row
        if status == RunStatus.COMPLETED:
            return value
        if status == RunStatus.CANCELLED:
            raise WorkflowCancelledError(workflow_id)
        if status in (RunStatus.FAILED, RunStatus.TIMED_OUT):
            raise WorkflowFailedError(workflow_id, error or {"type": status})
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"Workflow run {workflow_id!r} is still {status}.")
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
        time.sleep(delay if remaining is None else min(delay, remaining))
        delay = min(delay * 1.5, 0.5)


@dataclass(frozen=True)
class WorkflowDescription:
    workflow_id: str
    workflow_name: str
    workflow_version: int
    status: str
    owner_engine_id: str | None
    owner_hostname: str | None
    epoch: int
    claim_expires_at: datetime | None
    waiting_on: dict[str, Any] | None
    wake_at: datetime | None
    pending_signals: int
    pending_updates: int
    parent_id: str
    created_at: datetime
    updated_at: datetime
    result: Any
    error: dict[str, Any] | None


def describe(workflow_id: str) -> WorkflowDescription:
    run = (
        WorkflowRun.objects.using(USING)
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
        Claim.objects.using(USING)
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


@dataclass(frozen=True)
class WorkflowHandle:
    """A reference to one run; every method is the module-level verb of that name."""

    id: str

    def signal(self, name: str, payload: Any = None, *, signal_id: str | None = None) -> None:
        signal(self.id, name, payload, signal_id=signal_id)

    def cancel(self) -> None:
        cancel(self.id)

    def suspend(self) -> None:
        suspend(self.id)

    def resume(self) -> None:
        resume(self.id)

    def purge(self) -> None:
        purge(self.id)

    def result(self, timeout: float | None = None) -> Any:
        return result(self.id, timeout)

    def update(
        self,
        name: str,
        payload: Any = None,
        *,
        timeout: float = 30.0,
        update_id: str | None = None,
    ) -> Any:
        from .updates import update

        return update(self.id, name, payload, timeout=timeout, update_id=update_id)

    def query(self, name: str, *args: Any) -> Any:
        from .updates import query

        return query(self.id, name, *args)

    def describe(self) -> WorkflowDescription:
        return describe(self.id)


__all__ = [
    "WorkflowDescription",
    "WorkflowHandle",
    "cancel",
    "describe",
    "get_handle",
    "purge",
    "result",
    "resume",
    "signal",
    "start",
    "suspend",
]
