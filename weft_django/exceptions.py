"""Every error and warning weft_django raises; all errors subclass ``WeftError``."""

from __future__ import annotations

import logging
import warnings
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger("weft_django")


class WeftError(Exception):
    """Base class of every weft_django error."""


class WeftConfigurationError(WeftError, ImproperlyConfigured):
    """Invalid ``WEFT`` settings or an unusable database for the configured mode."""


class MetricsServerError(WeftError, OSError):
    """The worker could not serve its Prometheus metrics on the address and
    port asked for (the port is taken, or the address is not this machine's)."""


class WorkflowNotRegisteredError(WeftError, LookupError):
    """No workflow is registered under ``name`` (or no ``version`` of it) in this
    process: raised by ``start`` and ``ctx.start_child`` (``weft.query`` reports
    it as ``QueryError``).

    Workflows register when their module is imported: put them in a
    ``workflows`` module of an installed app. Also a ``LookupError``.
    """

    def __init__(self, name: str, version: int | None = None) -> None:
        self.name = name
        self.version = version
        if version is not None:
            super().__init__(
                f"No version {version} of workflow {name!r} is registered in this process. "
                "Register it with @weft.workflow(name=..., version=...) in a 'workflows' "
                "module of an installed app."
            )
            return
        super().__init__(
            f"No workflow is registered under the name {name!r}. Register it with "
            "@weft.workflow in a 'workflows' module of an installed app."
        )


class WorkflowArgumentsError(WeftError, TypeError):
    """``start`` or ``ctx.start_child`` got arguments the workflow function cannot
    take (checked against its signature, ``ctx`` left out); nothing was stored."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"Workflow {name!r} cannot take these arguments: {reason}.")


class WorkflowAlreadyExistsError(WeftError):
    """``start`` or ``ctx.start_child`` was given a ``workflow_id`` that a run
    already has (whatever its status); nothing was stored. A purged id may be used
    again. ``workflow_id`` is the id.
    """

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(f"A workflow run with id {workflow_id!r} already exists.")


class StartManyError(WeftError, ValueError):
    """``start_many`` was given requests that ``start`` would refuse; nothing
    was stored. ``errors`` maps the index of each invalid request to the error
    ``start`` would have raised for it (``WorkflowNotRegisteredError``,
    ``WorkflowArgumentsError``, ``InvalidIdError``, ``PayloadError``, ...)."""

    def __init__(self, errors: dict[int, Exception]) -> None:
        self.errors = errors
        first = min(errors)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(
            f"{len(errors)} of the requests cannot be started, nothing was stored: "
            f"request {first}: {errors[first]}{more}"
        )


class WorkflowNotFoundError(WeftError, LookupError):
    """No run has the id ``workflow_id`` on that database (never started, or
    purged). Raised by every verb that takes a run's id. Also a ``LookupError``.
    """

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(f"No workflow run with id {workflow_id!r}.")


class ScheduleNotFoundError(WeftError, LookupError):
    """No schedule is declared (``@weft.schedule`` or ``WEFT["SCHEDULES"]``) by the
    name ``name``. Raised by the schedule verbs. Also a ``LookupError``."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"No schedule named {name!r} is declared.")


class WorkflowTerminalError(WeftError):
    """The run's status does not allow what was asked: it has finished (a signal,
    an update, a cancel), or it is already in the status asked for.

    ``wanted`` is the status a transition asked for (``"cancelled"``,
    ``"suspended"``); without it the message is about input (signals, updates).
    """

    def __init__(self, workflow_id: str, status: str, wanted: str | None = None) -> None:
        self.workflow_id = workflow_id
        self.status = status
        self.wanted = wanted
        if wanted is None:
            message = f"Workflow run {workflow_id!r} is {status}; it accepts no more input."
        elif wanted == status:
            message = f"Workflow run {workflow_id!r} is already {status}."
        else:
            message = (
                f"Workflow run {workflow_id!r} is {status}; a run that is {status} "
                f"cannot be {wanted}."
            )
        super().__init__(message)


class WorkflowNotSuspendedError(WeftError):
    """``resume`` of a run that is not suspended (it is running, waiting or finished)."""

    def __init__(self, workflow_id: str, status: str) -> None:
        self.workflow_id = workflow_id
        self.status = status
        super().__init__(
            f"Workflow run {workflow_id!r} is {status}, not suspended: only a suspended "
            "run can be resumed."
        )


class WorkflowForkError(WeftError, ValueError):
    """``weft.fork(run_id, from_step=N)`` cannot carry the run's history up to
    its step ``N`` over to a new run: the run recorded fewer than ``N`` steps, is
    still active, or its history before step ``N`` holds an operation whose
    input a new run cannot be given (a child workflow, an update, a
    ``wait_until``; docs/workflows.md, "Retry and fork"). Nothing was stored.
    Also a ``ValueError``."""

    def __init__(self, workflow_id: str, from_step: int, reason: str) -> None:
        self.workflow_id = workflow_id
        self.from_step = from_step
        self.reason = reason
        super().__init__(
            f"Workflow run {workflow_id!r} cannot be forked from step {from_step}: {reason}."
        )


class StoreBusyError(WeftError):
    """The database could not take the write in time: another process holds the lock
    (SQLite: its single write lock; PostgreSQL: a row lock). Nothing was written; try
    again."""


class WorkflowBusyError(StoreBusyError):
    """The run's row is locked by its owner's open transaction (e.g. a transactional
    step); the operation was not applied. Try again."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(
            f"Workflow run {workflow_id!r} is busy: its owner holds it in an open "
            "transaction. Nothing was changed; try again."
        )


class WorkflowFailedError(WeftError):
    """The run ended ``failed`` or ``timed_out`` (``status``); ``error`` is what it stored."""

    def __init__(
        self, workflow_id: str, error: dict[str, Any] | None = None, *, status: str = "failed"
    ) -> None:
        self.workflow_id = workflow_id
        self.error = error or {}
        self.status = status
        if status == "timed_out":
            text = f"Workflow run {workflow_id!r} timed out: its execution timeout passed."
        else:
            kind = str(self.error.get("type") or "")
            message = str(self.error.get("message") or "")
            detail = f"{kind}: {message}" if kind and message else message or kind
            if detail == status:
                detail = ""  # no error was stored, only the status
            text = f"Workflow run {workflow_id!r} failed" + (f": {detail}" if detail else ".")
        super().__init__(text)


class WorkflowCancelledError(WeftError):
    """``result`` (or a parent's ``ChildHandle.result``) of a run that ended
    ``cancelled``; ``workflow_id`` is the run's id."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(f"Workflow run {workflow_id!r} was cancelled.")


class WaitTimeoutError(WeftError, TimeoutError):
    """A durable wait (signal, update, predicate) passed its timeout."""


class UpdateTimeoutError(WeftError, TimeoutError):
    """``update`` got no answer within its ``timeout``; the request was not lost.

    It stays stored and may still be applied; calling ``update`` again with the
    same ``update_id`` (this error's ``update_id``) returns its answer, until the
    answer expires after ``WEFT['UPDATE_RESPONSE_TTL']``. Also a ``TimeoutError``.
    """

    def __init__(self, update_id: str) -> None:
        self.update_id = update_id
        super().__init__(
            f"No response to update {update_id!r} in time. The request stays stored and "
            "may still be applied later; call update() again with the same update_id "
            "to collect its result."
        )


class UpdateRejectedError(WeftError):
    """The update was not applied (its validator refused it, no handler or waiter
    takes its name) or, with ``status == "failed"``, its handler raised."""

    def __init__(self, update_id: str, message: str, *, status: str = "rejected") -> None:
        self.update_id = update_id
        self.message = message
        self.status = status
        outcome = "failed in its handler" if status == "failed" else "was rejected"
        super().__init__(f"Update {update_id!r} {outcome}: {message}")


class NonDeterminismError(WeftError):
    """Replay found the workflow's code asking for a different operation than the
    history recorded at position ``seq`` (``expected``: what the code asks for;
    ``found``: what was recorded).

    The worker suspends the run with this error recorded; deploy code that
    replays the history, then ``resume`` it. A query that meets it raises
    ``QueryError`` instead.
    """

    def __init__(self, workflow_id: str, seq: int, expected: str, found: str) -> None:
        self.workflow_id = workflow_id
        self.seq = seq
        self.expected = expected
        self.found = found
        super().__init__(
            f"Workflow run {workflow_id!r} is not deterministic at operation #{seq}: "
            f"history recorded {found}, the code now asks for {expected}. The run is "
            "suspended; deploy code that replays its history, then resume it."
        )


class PayloadError(WeftError, ValueError):
    """A value is not JSON-serialisable, nests deeper than ``MAX_PAYLOAD_DEPTH``
    (30 levels), or is over ``WEFT['MAX_PAYLOAD_BYTES']``."""

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason
        super().__init__(f"{what}: {reason}")


class InvalidIdError(WeftError, ValueError):
    """An id or a name (a run's ``workflow_id``, a child's id, a step, signal,
    update or query name, a ``signal_id`` or ``update_id``) that its database
    column cannot hold: not a string, empty, longer than the column's
    ``max_length`` (``limit``, 255 characters), holding a NUL character or an
    unpaired UTF-16 surrogate, or without a visible character (only
    whitespace, control or format characters such as a zero-width space).

    ``what`` names the parameter (``"workflow_id"``, ``"signal name"``, ...).
    Raised before anything is stored; in workflow code (``ctx.step(name=...)``,
    ``ctx.start_child``, ``ctx.wait_for_signal`` ...) it fails the run like any
    exception the workflow does not catch, and it is raised the same way on
    every replay.
    """

    def __init__(self, what: str, value: Any, reason: str, limit: int) -> None:
        self.what = what
        self.value = value
        self.reason = reason
        self.limit = limit
        shown = ""
        if isinstance(value, str):
            shown = f"; got {value[:40]!r}"
            if len(value) > 40:
                shown += f" (its first 40 of {len(value)} characters)"
        super().__init__(
            f"{what} {reason}{shown}"
            + f". An id or a name is a string of 1 to {limit} characters with a visible "
            "character, no NUL and no unpaired surrogate."
        )


class FlowControlError(WeftError, ValueError):
    """A bad ``queue``, ``priority`` or ``concurrency_key`` given to ``start()``
    (or ``@workflow(queue=...)``): a queue that is neither ``"default"`` nor in
    ``WEFT["QUEUES"]``, a priority that is not an int from -100 to 100, a key
    that is not a string of 1 to 128 characters. ``what`` names the parameter.
    Raised before anything is stored. Also a ``ValueError``."""

    def __init__(self, what: str, value: Any, reason: str) -> None:
        self.what = what
        self.value = value
        self.reason = reason
        super().__init__(f"{what} {reason}; got {value!r:.80}")


class RetryAfter(Exception):
    """Raised by a step's function to ask for its next attempt no sooner than
    ``seconds`` from now (an HTTP ``Retry-After``, a rate limit's reset).

    ``ctx.step(..., retry=RetryPolicy(...))`` honours it: while attempts are
    left, the run sleeps durably (it parks with a timer, on any worker) until
    then instead of the policy's own interval; with none left the step fails
    as with any other exception. ``seconds`` is a finite number of at least 0.
    """

    def __init__(self, seconds: float, message: str = "") -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"RetryAfter seconds must be a number, not {seconds!r}")
        if not 0 <= float(seconds) < 10**9:
            raise ValueError(f"RetryAfter seconds must be from 0 to 1e9, not {seconds!r}")
        self.seconds = float(seconds)
        super().__init__(message or f"retry after {self.seconds:g}s")


class WorkflowClaimUnavailableError(WeftError):
    """``resume`` found a live engine (``held_by``) still holding the run's claim;
    nothing was changed. Try again once that engine has let the claim go.
    """

    def __init__(self, workflow_id: str, held_by: str | None) -> None:
        self.workflow_id = workflow_id
        self.held_by = held_by
        super().__init__(
            f"Workflow run {workflow_id!r} is owned by live engine {held_by!r}; "
            "it cannot be claimed now."
        )


class EngineDeposedError(WeftError):
    """A fenced write found that this engine no longer holds the run's claim at
    the epoch it worked under (the run was cancelled, suspended, purged or taken
    over): the write's transaction was rolled back.

    The engine stops driving the run and drops it; application code does not see
    this error unless it calls the engine's internals.
    """

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(
            f"This engine no longer holds the claim on workflow run {workflow_id!r} "
            "at its epoch; the write was rolled back."
        )


class OwnershipModeMismatchError(WeftConfigurationError):
    """``WEFT['OWNERSHIP']`` (``configured_mode``) differs from the mode the
    database was established in (``stored_mode``, at ``established_at``).

    Raised when an engine starts; engines of different modes never share a
    database. Fix the setting, or stop every engine and run
    ``manage.py weft_marker --reset``.
    """

    def __init__(self, configured_mode: str, stored_mode: str, established_at: datetime) -> None:
        self.configured_mode = configured_mode
        self.stored_mode = stored_mode
        self.established_at = established_at
        super().__init__(
            f"WEFT['OWNERSHIP'] is {configured_mode!r} but this database was established "
            f"in ownership mode {stored_mode!r} at {established_at.isoformat()}. Engines of "
            "different modes must never share a database: set WEFT['OWNERSHIP'] to "
            f"{stored_mode!r}, or stop every engine and run "
            "'manage.py weft_marker --reset' to re-establish the mode."
        )


class OwnershipMarkerCorruptError(WeftConfigurationError):
    """The store-wide ownership-mode marker row cannot be decoded."""


class OwnershipMarkerDeletedError(WeftConfigurationError):
    """The marker vanished between a lost insert race and the re-read."""


class WeftWorkflowClaimLostWarning(UserWarning):
    """This engine lost its claim on ``workflow_id`` (a renewal or a fenced write
    found it revoked or taken over): it dropped the run, and the claim's holder
    drives it from here. Logged and emitted through :mod:`warnings`.
    """

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(f"Claim on workflow run {workflow_id!r} was lost to another engine.")


class WeftWorkflowWakeDiscardedWarning(UserWarning):
    """A wake for ``workflow_id`` reached this engine after it had lost the run's
    claim at the epoch it cached: the wake was discarded, the current holder acts
    on it. ``wake_kind`` is ``"tick"``, ``"signal"`` or ``"update"``. Logged and
    emitted through :mod:`warnings`.
    """

    def __init__(self, workflow_id: str, wake_kind: str) -> None:
        self.workflow_id = workflow_id
        self.wake_kind = wake_kind
        super().__init__(
            f"Discarded a {wake_kind} wake for workflow run {workflow_id!r}: this engine "
            "no longer holds its claim at the cached epoch."
        )


class WeftSecondEngineWarning(UserWarning):
    """Mode ``none`` found another live engine on the same database."""


def warn(warning: Warning) -> None:
    """Log ``warning`` and emit it through :mod:`warnings` (the README)."""
    logger.warning("%s", warning)
    try:
        warnings.warn(warning, stacklevel=2)
    except Warning:
        # A filter turned warnings into errors ("-W error"): the engine must not
        # stop because of that; the warning has been logged above.
        pass


class StepFailedError(WeftError):
    """A ``ctx.step`` exhausted its retries; raised live and on replay alike.

    The original exception's type name and message are kept as fields (never
    the exception object itself, which could not be replayed faithfully).
    """

    def __init__(self, step_name: str, error_type: str, message: str) -> None:
        self.step_name = step_name
        self.error_type = error_type
        self.message = message
        super().__init__(f"Step {step_name!r} failed: {error_type}: {message}")


class HandlerError(WeftError):
    """An update or query handler called a durable ``ctx`` operation."""


class QueryError(WeftError):
    """A query could not be answered (unknown name, pending run, handler raised)."""


class DrainError(WeftError):
    """A store-wide pass (a Celery beat task) took a run, but its turn did not reach
    a park point: reported as ``drain_failed`` in the pass's summary."""
