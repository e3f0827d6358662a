"""The public verbs, callable from any process: views, shell, Celery tasks.

None of these needs to own the run. ``cancel``, ``suspend`` and ``purge``
rotate the claim's epoch and drop its holder in the same transaction as the
status write, so a still-running owner's next fenced write fails and it
stops that run (docs/ownership.md, "Revocation"). Every verb takes
``using=None``, as Django's own APIs do: the database alias weft's tables
live on (default: the router's choice for writes, normally ``"default"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import operations, recovery
from ..exceptions import (
    WorkflowAlreadyExistsError,
    WorkflowNotFoundError,
)
from ..flow.settings import check_key, check_priority, check_queue
from ..models import WorkflowRun, db_for
from ..ownership import busy_as_typed_error
from ..runtime import registry
from ..runtime.payload import check_id
from ..runtime.runs import Flow
from ..runtime.starts import insert_runs, prepare_run
from . import updates
from .reads import WorkflowDescription, describe, result


def start(
    workflow: str | Callable[..., Any],
    *args: Any,
    workflow_id: str | None = None,
    start_at: datetime | None = None,
    version: int | None = None,
    using: str | None = None,
    queue: str | None = None,
    priority: int = 0,
    concurrency_key: str | None = None,
    **kwargs: Any,
) -> WorkflowHandle:
    """Start a run of a registered workflow; returns once the run is stored.

    ``workflow_id``, ``start_at``, ``version`` and ``using`` are this function's
    own; every other keyword argument goes to the workflow. The workflow must be
    registered in the calling process (``WorkflowNotRegisteredError``): a name
    starts the highest version registered here, a decorated function its own,
    ``version=`` the one given (the run keeps it for life); the arguments are
    bound against its function's signature, ``ctx`` left out, and arguments it
    cannot take raise ``WorkflowArgumentsError`` with nothing stored.

    ``workflow_id`` (default: a random hex id) is 1 to 255 characters with a
    visible one, no NUL and no unpaired surrogate; every verb checks the id (and
    the names) it is given by that rule, before the database, and raises
    ``InvalidIdError`` (a ``ValueError`` naming the parameter) otherwise
    (docs/workflows.md, "Ids and names"). ``start_at`` is timezone-aware, and
    it and its execution deadline (``start_at`` + the workflow's ``timeout``)
    are within UTC's range, else ``ValueError`` naming ``start_at``.

    Flow control (docs/flow-control.md): ``queue`` (default: the workflow's
    ``@workflow(queue=...)``, else ``"default"``) must be ``"default"`` or a
    queue of ``WEFT["QUEUES"]``; ``priority`` an int from -100 to 100 (higher
    first); ``concurrency_key`` None or a string of 1 to 128 characters, the
    key its queue's per-key limits count by. ``FlowControlError`` (a
    ``ValueError`` naming the parameter) otherwise, with nothing stored.
    """
    alias = db_for(using)
    definition = registry.resolve(workflow, version)
    row = prepare_run(
        definition,
        args,
        kwargs,
        workflow_id=workflow_id,
        start_at=start_at,
        flow=Flow(
            queue=check_queue(queue if queue is not None else definition.queue),
            priority=check_priority(priority),
            concurrency_key=check_key(concurrency_key),
        ),
    )
    # One statement that skips an id that exists (no savepoint, the caller's
    # transaction stays usable), its wake-up in it (runtime/starts.py).
    with busy_as_typed_error():
        if not insert_runs((row,), using=alias):
            raise WorkflowAlreadyExistsError(row.id)
    return WorkflowHandle(row.id, using=using)


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
    workflow_id: str,
    *,
    children: bool = False,
    reason: str | None = None,
    by: Any = None,
    using: str | None = None,
) -> None:
    """Cancel a run from any process: epoch rotated, holder dropped, status cancelled.

    With ``children=True`` its unfinished descendants (the runs it started with
    ``ctx.start_child``, theirs, ...) are cancelled too, each the same way in
    its own transaction, after it and level by level
    (:func:`weft_django.recovery.cancel_tree`); a descendant that could not be
    cancelled raises its error once the others are done. By default children
    are left running (docs/workflows.md, "Children").

    The run's error records who and why: ``"cancelled by <by>: <reason>"``
    (``by`` a user or a name, default ``"an operator"``; ``reason`` at most 500
    characters). Logged on ``weft_django.operations``; a user also gets a
    Django admin ``LogEntry``. ``WorkflowTerminalError`` when the run has
    finished (or is already cancelled), ``WorkflowNotFoundError`` when there is
    no such run, ``WorkflowBusyError`` when its owner holds the run's row in an
    open transaction (a transactional step) past the bounded lock wait; nothing
    is changed then. A reason over 500 characters raises ``ValueError``.
    """
    if not children:
        operations.cancel(workflow_id, reason=reason, by=by, using=using)
        return
    outcome = recovery.cancel_tree(workflow_id, reason=reason, by=by, using=using)
    if outcome.failed:
        raise outcome.failed[0][1]


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

    def cancel(self, *, children: bool = False, reason: str | None = None, by: Any = None) -> None:
        """Cancel this run (and its unfinished descendants with ``children=True``).

        The arguments, the return value and the errors are those of :func:`cancel`,
        on this handle's run and database alias (``using``).
        """
        cancel(self.id, children=children, reason=reason, by=by, using=self.using)

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
    "WorkflowHandle",
    "cancel",
    "get_handle",
    "purge",
    "resume",
    "signal",
    "start",
    "suspend",
]
