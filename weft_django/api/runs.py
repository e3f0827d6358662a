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

from .. import operations
from ..exceptions import (
    WorkflowAlreadyExistsError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowNotFoundError,
)
from ..models import Claim, RunStatus, UpdateStatus, WorkflowRun, db_for
from ..ownership import busy_as_typed_error
from ..runtime import registry
from ..runtime.payload import check_id, check_start_at, encode_call
from ..runtime.polling import NOT_YET, RESULT_BACKOFF, Poll, check_timeout
from ..runtime.runs import IGNORE_DUPLICATE_VENDORS, insert_new_run, is_duplicate_key, new_run
from ..runtime.wakeups import notify
from . import updates


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
    except IntegrityError as exc:
        if not is_duplicate_key(exc):
            raise
        raise WorkflowAlreadyExistsError(workflow_id) from None
    notify(workflow_id, using=alias)
    return WorkflowHandle(workflow_id, using=using)


def get_handle(workflow_id: str, *, using: str | None = None) -> WorkflowHandle:
    """A :class:`WorkflowHandle` for an existing run, from any process.

    One read checks that the run exists: ``WorkflowNotFoundError`` when there is
    no run ``workflow_id`` on the database ``using``. The handle holds only the
    id and the alias; it does not load or lock the run.
    """
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

    The signal is stored (in the caller's transaction, if any) for the run's
    ``ctx.wait_for_signal(name)``, its owner is woken, and the call returns
    without waiting for the run to take it. ``payload`` must be JSON-serialisable
    and within ``WEFT['MAX_PAYLOAD_BYTES']`` (``PayloadError``). Raises
    ``WorkflowNotFoundError`` when there is no such run, ``WorkflowTerminalError``
    when it has finished (a repeated ``signal_id`` is still a no-op then), and
    ``StoreBusyError`` when the database could not take the write in time.

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
    finished (or is already cancelled), ``WorkflowNotFoundError`` when there is
    no such run, ``WorkflowBusyError`` when its owner holds the run's row in an
    open transaction (a transactional step) past the bounded lock wait; nothing
    is changed then. A reason over 500 characters raises ``ValueError``.
    """
    operations.cancel(workflow_id, reason=reason, by=by, using=using)


def suspend(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Suspend a run: it stops on its owner and stays put until ``resume``.

    ``reason`` and ``by`` are recorded as for :func:`cancel` (with either, the
    run's error says ``"suspended by <by>: <reason>"``). ``WorkflowTerminalError``
    when the run is already suspended or has finished; ``WorkflowNotFoundError``
    and ``WorkflowBusyError`` as for :func:`cancel`.
    """
    operations.suspend(workflow_id, reason=reason, by=by, using=using)


def resume(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Make a suspended run runnable again under a fresh claim epoch.

    The run goes back to ``pending`` (never started) or ``waiting``, with its
    recorded error cleared, and any worker may claim it. Raises
    ``WorkflowNotSuspendedError`` when the run is not suspended,
    ``WorkflowClaimUnavailableError`` if a live engine still holds its claim, and
    ``WorkflowNotFoundError`` and ``WorkflowBusyError`` as for :func:`cancel`.
    ``reason`` and ``by`` are logged as for :func:`cancel`.
    """
    operations.resume(workflow_id, reason=reason, by=by, using=using)


def purge(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Delete a run and its history; its claim epoch is rotated, never reset.

    Any status may be purged, a running one included (its owner's next fenced
    write fails and it drops the run). The claim row stays, so an id purged and
    started again never reuses an epoch. ``reason`` and ``by`` are logged as
    for :func:`cancel` (a user gets a DELETION ``LogEntry``).
    ``WorkflowNotFoundError`` and ``WorkflowBusyError`` as for :func:`cancel`.
    """
    operations.purge(workflow_id, reason=reason, by=by, using=using)


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


@dataclass(frozen=True)
class WorkflowHandle:
    """A reference to one run; every method is the module-level verb of that name.

    :func:`start` and :func:`get_handle` return one; ``WorkflowHandle(id)`` makes
    one without reading the database (a missing run is reported by the first
    verb called). Two handles are equal when their ids are.
    """

    id: str
    """The run's id."""
    using: str | None = field(default=None, compare=False)
    """The database alias every verb of this handle uses (None: the router's choice)."""

    def signal(
        self,
        name: str,
        payload: Any = None,
        *,
        signal_id: str | None = None,
        reason: str | None = None,
        by: Any = None,
    ) -> None:
        """Durably buffer a signal for this run.

        The arguments, the return value and the errors are those of :func:`signal`,
        on this handle's run and database alias (``using``).
        """
        signal(self.id, name, payload, signal_id=signal_id, reason=reason, by=by, using=self.using)

    def update(
        self,
        name: str,
        payload: Any = None,
        *,
        timeout: float | None = 30.0,
        update_id: str | None = None,
    ) -> Any:
        """Send an update into this run and return its handler's result.

        The arguments, the return value and the errors are those of :func:`~weft_django.update`,
        on this handle's run and database alias (``using``).
        """
        return updates.update(
            self.id, name, payload, timeout=timeout, update_id=update_id, using=self.using
        )

    def query(self, name: str, *args: Any) -> Any:
        """Answer a query from this run's history, in this process.

        The arguments, the return value and the errors are those of :func:`~weft_django.query`,
        on this handle's run and database alias (``using``).
        """
        return updates.query(self.id, name, *args, using=self.using)

    def cancel(self, *, reason: str | None = None, by: Any = None) -> None:
        """Cancel this run.

        The arguments, the return value and the errors are those of :func:`cancel`,
        on this handle's run and database alias (``using``).
        """
        cancel(self.id, reason=reason, by=by, using=self.using)

    def suspend(self, *, reason: str | None = None, by: Any = None) -> None:
        """Suspend this run until it is resumed.

        The arguments, the return value and the errors are those of :func:`suspend`,
        on this handle's run and database alias (``using``).
        """
        suspend(self.id, reason=reason, by=by, using=self.using)

    def resume(self, *, reason: str | None = None, by: Any = None) -> None:
        """Make this suspended run runnable again.

        The arguments, the return value and the errors are those of :func:`resume`,
        on this handle's run and database alias (``using``).
        """
        resume(self.id, reason=reason, by=by, using=self.using)

    def purge(self, *, reason: str | None = None, by: Any = None) -> None:
        """Delete this run and its history.

        The arguments, the return value and the errors are those of :func:`purge`,
        on this handle's run and database alias (``using``).
        """
        purge(self.id, reason=reason, by=by, using=self.using)

    def result(self, timeout: float | None = None) -> Any:
        """Block until this run is terminal; return its result or raise its failure.

        The arguments, the return value and the errors are those of :func:`result`,
        on this handle's run and database alias (``using``).
        """
        return result(self.id, timeout, using=self.using)

    def describe(self) -> WorkflowDescription:
        """What this run is doing now: a :class:`WorkflowDescription`.

        The arguments, the return value and the errors are those of :func:`describe`,
        on this handle's run and database alias (``using``).
        """
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
