"""The public verbs, callable from any process: views, shell, Celery tasks.

None of these needs to own the run. ``cancel``, ``suspend`` and ``purge``
rotate the claim's epoch and drop its holder in the same transaction as the
status write, so a still-running owner's next fenced write fails and it
stops that run (docs/ownership.md, "Revocation"). Every verb takes
``using=None``, as Django's own APIs do: the database alias weft's tables
live on (default: the router's choice for writes, normally ``"default"``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Count, Q
from django.db.transaction import TransactionManagementError

from . import operations, updates
from .exceptions import (
    WorkflowAlreadyExistsError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowNotFoundError,
)
from .models import Claim, RunStatus, UpdateStatus, WorkflowRun, db_for
from .ownership.locks import busy_as_typed_error
from .runtime import registry
from .runtime.payload import check_id, check_start_at, encode_call
from .runtime.polling import NOT_YET, RESULT_BACKOFF, Poll, check_timeout
from .runtime.runs import IGNORE_DUPLICATE_VENDORS, insert_new_run, new_run
from .runtime.wakeups import notify


def start(
    workflow: str | Callable[..., Any],
    *args: Any,
    workflow_id: str | None = None,
    start_at: datetime | None = None,
    using: str | None = None,
    **kwargs: Any,
) -> WorkflowHandle:
    """Start a run of a registered workflow; returns once the run is stored.

    ``workflow_id``, ``start_at`` and ``using`` are this function's own; every
    other keyword argument goes to the workflow. The workflow must be registered
    in the calling process (``WorkflowNotRegisteredError``); the arguments are
    bound against its function's signature, ``ctx`` left out, and arguments it
    cannot take raise ``WorkflowArgumentsError`` with nothing stored.

    ``workflow_id`` (default: a random hex id) is 1 to 255 characters with a
    visible one, no NUL and no unpaired surrogate; every verb checks the id (and
    the names) it is given by that rule, before the database, and raises
    ``InvalidIdError`` (a ``ValueError`` naming the parameter) otherwise
    (docs/workflows.md, "Ids and names"). ``start_at`` is timezone-aware, and
    it and its execution deadline (``start_at`` + the workflow's ``timeout``)
    are within UTC's range, else ``ValueError`` naming ``start_at``.
    """
    alias = db_for(using)
    definition = registry.resolve(workflow)
    definition.check_arguments(args, kwargs)
    workflow_id = check_id(workflow_id) if workflow_id is not None else uuid.uuid4().hex
    start_at = check_start_at(start_at, definition.timeout)
    encoded_args, encoded_kwargs = encode_call(args, kwargs, f"workflow {definition.name!r}")
    # Inside a caller's transaction a duplicate id must not break it: a plain
    # INSERT that skips the duplicate key where the database has one for that
    # alone (one statement, as a burst of starts in one transaction wants), else
    # a savepoint. In autocommit the single INSERT is atomic by itself.
    connection = connections[alias]
    in_transaction = connection.in_atomic_block
    run = (definition, workflow_id, encoded_args, encoded_kwargs)
    try:
        with busy_as_typed_error():
            if in_transaction and connection.vendor in IGNORE_DUPLICATE_VENDORS:
                if not insert_new_run(*run, start_at=start_at, using=alias):
                    raise WorkflowAlreadyExistsError(workflow_id)
            else:
                with transaction.atomic(using=alias) if in_transaction else nullcontext():
                    new_run(*run, start_at=start_at, using=alias)
    except IntegrityError:
        raise WorkflowAlreadyExistsError(workflow_id) from None
    notify(workflow_id, using=alias)
    return WorkflowHandle(workflow_id, using=using)


def get_handle(workflow_id: str, *, using: str | None = None) -> WorkflowHandle:
    """A handle on an existing run; ``WorkflowNotFoundError`` when there is none."""
    check_id(workflow_id)
    if not WorkflowRun.objects.using(db_for(using)).filter(pk=workflow_id).exists():
        raise WorkflowNotFoundError(workflow_id)
    return WorkflowHandle(workflow_id, using=using)


def signal(
    workflow_id: str,
    name: str,
    payload: Any = None,
    *,
    signal_id: str | None = None,
    reason: str | None = None,
    by: Any = None,
    using: str | None = None,
) -> None:
    """Durably buffer a signal; a repeated ``signal_id`` is a no-op.

    ``reason`` (at most 500 characters) and ``by`` (a user or a name) are for
    an operator's signal: with either, it is logged at INFO on
    ``weft_django.operations``, and a user gets a Django admin ``LogEntry``
    (docs/admin.md, "Audit trail").
    """
    operations.signal(
        workflow_id, name, payload, signal_id=signal_id, reason=reason, by=by, using=using
    )


def cancel(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Cancel a run from any process: epoch rotated, holder dropped, status cancelled.

    The run's error records who and why: ``"cancelled by <by>: <reason>"``
    (``by`` a user or a name, default ``"an operator"``; ``reason`` at most 500
    characters). Logged on ``weft_django.operations``; a user also gets a
    Django admin ``LogEntry``. ``WorkflowTerminalError`` when the run has
    finished (or is already cancelled).
    """
    operations.cancel(workflow_id, reason=reason, by=by, using=using)


def suspend(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Suspend a run: it stops on its owner and stays put until ``resume``.

    ``reason`` and ``by`` are recorded as for :func:`cancel` (with either, the
    run's error says ``"suspended by <by>: <reason>"``). ``WorkflowTerminalError``
    when the run is already suspended or has finished.
    """
    operations.suspend(workflow_id, reason=reason, by=by, using=using)


def resume(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Make a suspended run runnable again under a fresh claim epoch.

    Raises ``WorkflowClaimUnavailableError`` if a live engine holds the claim.
    ``reason`` and ``by`` are logged as for :func:`cancel`.
    """
    operations.resume(workflow_id, reason=reason, by=by, using=using)


def purge(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Delete a run and its history; its claim epoch is rotated, never reset.

    ``reason`` and ``by`` are logged as for :func:`cancel` (a user gets a
    DELETION ``LogEntry``).
    """
    operations.purge(workflow_id, reason=reason, by=by, using=using)


def result(workflow_id: str, timeout: float | None = None, *, using: str | None = None) -> Any:
    """Block until the run is terminal; return its result or raise its failure.

    ``timeout`` is how long to wait (None: as long as it takes; 0: look once);
    past it, ``TimeoutError``. A cancelled run raises ``WorkflowCancelledError``,
    a failed or timed-out one ``WorkflowFailedError``. Inside
    ``transaction.atomic()`` a run that is not finished yet raises
    ``TransactionManagementError`` at once (unless ``timeout=0``): the wait
    could only time out, as for ``update()``.
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


def describe(workflow_id: str, *, using: str | None = None) -> WorkflowDescription:
    """The run's status, owner, wait and counts, read in one go."""
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


@dataclass(frozen=True)
class WorkflowHandle:
    """A reference to one run; every method is the module-level verb of that name."""

    id: str
    using: str | None = field(default=None, compare=False)

    def signal(
        self,
        name: str,
        payload: Any = None,
        *,
        signal_id: str | None = None,
        reason: str | None = None,
        by: Any = None,
    ) -> None:
        signal(self.id, name, payload, signal_id=signal_id, reason=reason, by=by, using=self.using)

    def update(
        self,
        name: str,
        payload: Any = None,
        *,
        timeout: float | None = 30.0,
        update_id: str | None = None,
    ) -> Any:
        return updates.update(
            self.id, name, payload, timeout=timeout, update_id=update_id, using=self.using
        )

    def query(self, name: str, *args: Any) -> Any:
        return updates.query(self.id, name, *args, using=self.using)

    def cancel(self, *, reason: str | None = None, by: Any = None) -> None:
        cancel(self.id, reason=reason, by=by, using=self.using)

    def suspend(self, *, reason: str | None = None, by: Any = None) -> None:
        suspend(self.id, reason=reason, by=by, using=self.using)

    def resume(self, *, reason: str | None = None, by: Any = None) -> None:
        resume(self.id, reason=reason, by=by, using=self.using)

    def purge(self, *, reason: str | None = None, by: Any = None) -> None:
        purge(self.id, reason=reason, by=by, using=self.using)

    def result(self, timeout: float | None = None) -> Any:
        return result(self.id, timeout, using=self.using)

    def describe(self) -> WorkflowDescription:
        return describe(self.id, using=self.using)


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
