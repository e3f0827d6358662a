"""What an operator does to runs, with its audit trail: one code path for the
admin, the public verbs (``weft.cancel`` ... are thin wrappers) and any command.

Each operation (cancel, suspend, resume, purge, signal) on one run, or on a
batch (:func:`batch`), records who did it and why:

* the run's recorded error names the actor and the reason
  (``"cancelled by alice: duplicate order"``; without an actor,
  ``"cancelled by an operator"``); a suspended run's likewise;
* an INFO line on the ``weft_django.operations`` logger per run changed
  (``"cancelled run order-42 by alice: duplicate order"``). A signal sent by
  application code, with neither ``by`` nor ``reason``, is ordinary traffic
  and logs at DEBUG;
* when ``by`` is a user (anything with a ``pk`` and ``get_username()``, as
  ``request.user``) and ``django.contrib.admin`` is installed, a Django admin
  ``LogEntry`` (CHANGE, or DELETION for purge) for the run, written in the
  operation's own transaction when it lives on the same database (so there is
  no change without its entry). A ``LogEntry`` needs a user: a name or no
  actor gets the log line only.

:data:`APPLIES_TO` is the one home of "which operation applies to a run in
which status": the admin offers only those, and :func:`refusal` is the error
the operation raises otherwise.

This module sits in the public layer, below the hosts (admin, commands) and
beside ``api``, which calls it; it calls the runtime's transitions and never
imports ``api``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.db import router

from .exceptions import (
    WeftError,
    WorkflowNotSuspendedError,
    WorkflowTerminalError,
)
from .models import TERMINAL_STATUSES, RunStatus, WorkflowRun, WorkflowSignal, db_for
from .ownership import busy_as_typed_error
from .runtime.inbox import deliver
from .runtime.payload import SIGNAL_ID, SIGNAL_NAME, check_id, encode
from .runtime.runs import TRANSITIONS_FROM, Within, purge_run, resume_run, transition

logger = logging.getLogger("weft_django.operations")

#: The longest reason accepted (characters).
MAX_REASON_LENGTH = 500
#: The longest actor name accepted (Django's username is at most 150).
MAX_ACTOR_LENGTH = 150
#: Who is named when the caller names nobody.
NO_ACTOR = "an operator"

#: The statuses each operation applies to, in the order the admin offers them.
APPLIES_TO: dict[str, frozenset[str]] = {
    "cancel": frozenset(TRANSITIONS_FROM[RunStatus.CANCELLED]),
    "suspend": frozenset(TRANSITIONS_FROM[RunStatus.SUSPENDED]),
    "resume": frozenset({RunStatus.SUSPENDED}),
    "signal": frozenset(set(RunStatus.values) - set(TERMINAL_STATUSES)),
    "purge": frozenset(RunStatus.values),
}

#: What each operation did, as the log line and the run's error say it.
DONE = {
    "cancel": "cancelled",
    "suspend": "suspended",
    "resume": "resumed",
    "purge": "purged",
    "signal": "signalled",
    # weft_django.recovery's, recorded the same way.
    "retry": "retried",
    "fork": "forked",
}


def applicable(status: str) -> list[str]:
    """The operations that apply to a run in ``status``."""
    return [operation for operation, statuses in APPLIES_TO.items() if status in statuses]


def refusal(operation: str, workflow_id: str, status: str) -> WeftError | None:
    """The error ``operation`` raises for a run in ``status``; None when it applies."""
    if status in APPLIES_TO[operation]:
        return None
    if operation == "resume":
        return WorkflowNotSuspendedError(workflow_id, status)
    if operation == "signal":
        return WorkflowTerminalError(workflow_id, status)
    return WorkflowTerminalError(workflow_id, status, wanted=DONE[operation])


# -- who and why ---------------------------------------------------------------------


def check_reason(reason: str | None) -> str | None:
    """``reason`` stripped (None when empty); ``ValueError`` past
    :data:`MAX_REASON_LENGTH` or when it is not a string."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise TypeError(f"reason must be a string, not {type(reason).__name__}")
    reason = " ".join(reason.split())  # one line: it goes into a log line
    if len(reason) > MAX_REASON_LENGTH:
        raise ValueError(f"reason is {len(reason)} characters; the limit is {MAX_REASON_LENGTH}")
    return reason or None


def actor_name(by: Any) -> str:
    """How ``by`` (a user, a name or None) is named in records."""
    if by is None:
        return NO_ACTOR
    if isinstance(by, str):
        name = " ".join(by.split())
        if not name:
            return NO_ACTOR
        if len(name) > MAX_ACTOR_LENGTH:
            raise ValueError(f"by is {len(name)} characters; the limit is {MAX_ACTOR_LENGTH}")
        return name
    get_username = getattr(by, "get_username", None)
    if callable(get_username):
        return str(get_username()) or NO_ACTOR
    raise TypeError(f"by must be a user, a name or None, not {type(by).__name__}")


def user_id_of(by: Any) -> Any:
    """The primary key of ``by`` when it is a saved user (a LogEntry is written)."""
    if by is None or isinstance(by, str) or not callable(getattr(by, "get_username", None)):
        return None
    return getattr(by, "pk", None)


def recorded(operation: str, name: str, reason: str | None) -> str:
    """``"cancelled by alice: reason"``, as the run's error and the admin say it."""
    text = f"{DONE[operation]} by {name}"
    return f"{text}: {reason}" if reason else text


@dataclass(frozen=True)
class Audit:
    """One operation's record: the log line now, the LogEntry in its transaction."""

    operation: str
    workflow_id: str
    by: Any
    reason: str | None
    detail: str = ""
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", actor_name(self.by))

    @property
    def text(self) -> str:
        return recorded(self.operation, self.name, self.reason)

    def change_message(self) -> str:
        what = f"{DONE[self.operation].capitalize()}{self.detail}"
        return f"{what}. Reason: {self.reason}" if self.reason else f"{what} (no reason given)."

    def entry_writer(self, using: str) -> Within | None:
        """What writes the LogEntry (None when there is no user or no admin app)."""
        user_id = user_id_of(self.by)
        if user_id is None or not apps.is_installed("django.contrib.admin"):
            return None
        object_repr = self.object_repr(using)

        def write() -> None:
            from django.contrib.admin.models import CHANGE, DELETION, LogEntry
            from django.contrib.contenttypes.models import ContentType

            alias = router.db_for_write(LogEntry)
            content_type = ContentType.objects.db_manager(alias).get_for_model(
                WorkflowRun, for_concrete_model=False
            )
            LogEntry.objects.using(alias).create(
                user_id=user_id,
                content_type_id=content_type.pk,
                object_id=self.workflow_id,
                object_repr=object_repr[:200],
                action_flag=DELETION if self.operation == "purge" else CHANGE,
                change_message=self.change_message(),
            )

        return write

    def object_repr(self, using: str) -> str:
        run = WorkflowRun(id=self.workflow_id)
        run.workflow_name = (
            WorkflowRun.objects.using(using)
            .filter(pk=self.workflow_id)
            .values_list("workflow_name", flat=True)
            .first()
            or "?"
        )
        return str(run)

    def log(self, level: int = logging.INFO) -> None:
        logger.log(
            level,
            "%s run %s by %s%s%s",
            DONE[self.operation],
            self.workflow_id,
            self.name,
            self.detail,
            f": {self.reason}" if self.reason else "",
            extra={
                "weft_operation": self.operation,
                "workflow_id": self.workflow_id,
                "actor": self.name,
                "reason": self.reason,
            },
        )


# -- the operations ------------------------------------------------------------------


def cancel(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Cancel a run: epoch rotated, holder dropped, status cancelled (irreversible)."""
    _transition("cancel", RunStatus.CANCELLED, workflow_id, reason, by, using)


def suspend(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Suspend a live run: it stops on its owner and stays put until resumed."""
    _transition("suspend", RunStatus.SUSPENDED, workflow_id, reason, by, using)


def _transition(
    operation: str,
    status: RunStatus,
    workflow_id: str,
    reason: str | None,
    by: Any,
    using: str | None,
) -> None:
    check_id(workflow_id)
    using = db_for(using)
    audit = Audit(operation, workflow_id, by, check_reason(reason))
    # A suspension without actor or reason records no message (a suspension by
    # nondeterminism carries its own error).
    message = audit.text if (operation == "cancel" or audit.reason or by is not None) else None
    transition(workflow_id, status, message=message, within=audit.entry_writer(using), using=using)
    audit.log()


def resume(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Make a suspended run runnable again under a fresh claim epoch."""
    check_id(workflow_id)
    using = db_for(using)
    audit = Audit("resume", workflow_id, by, check_reason(reason))
    resume_run(workflow_id, within=audit.entry_writer(using), using=using)
    audit.log()


def purge(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> None:
    """Delete a run and its history; its claim epoch is rotated, never reset."""
    check_id(workflow_id)
    using = db_for(using)
    audit = Audit("purge", workflow_id, by, check_reason(reason))
    purge_run(workflow_id, within=audit.entry_writer(using), using=using)
    audit.log()


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
    """Durably buffer a signal; a repeated ``signal_id`` is a no-op (and not recorded)."""
    check_id(workflow_id)
    check_id(name, "signal name", SIGNAL_NAME)
    if signal_id is not None:
        check_id(signal_id, "signal_id", SIGNAL_ID)
    using = db_for(using)
    encoded = encode(payload, f"payload of signal {name!r}")
    if signal_id is not None:
        # A repeat is a no-op: no second row, and no wake hint that would cost
        # the owner a pointless turn (an idempotent retry after the run ended
        # also succeeds, as the first call did).
        if (
            WorkflowSignal.objects.using(using)
            .filter(run_id=workflow_id, signal_id=signal_id)
            .exists()
        ):
            return
    else:
        signal_id = uuid.uuid4().hex
    audit = Audit(
        "signal", workflow_id, by, check_reason(reason), detail=f" with {name!r} ({signal_id})"
    )
    with busy_as_typed_error():
        deliver(
            workflow_id,
            WorkflowSignal(run_id=workflow_id, signal_id=signal_id, name=name, payload=encoded),
            within=audit.entry_writer(using),
            using=using,
        )
    # Application code signals all the time: only an operator's signal is news.
    audit.log(logging.INFO if (by is not None or audit.reason) else logging.DEBUG)


# -- batches -------------------------------------------------------------------------


@dataclass
class BatchResult:
    """Which runs a batch changed and which it did not (with the error)."""

    operation: str
    done: list[str] = field(default_factory=list)
    failed: list[tuple[str, BaseException]] = field(default_factory=list)


def operation_function(operation: str) -> Callable[..., None]:
    """The function of ``operation`` (looked up when called, so it can be patched)."""
    functions: dict[str, Callable[..., None]] = {
        "cancel": cancel,
        "suspend": suspend,
        "resume": resume,
        "purge": purge,
        "signal": signal,
    }
    try:
        return functions[operation]
    except KeyError:
        raise ValueError(f"unknown operation {operation!r}") from None


def batch(
    operation: str,
    run_ids: list[str],
    *args: Any,
    reason: str | None = None,
    by: Any = None,
    using: str | None = None,
    **kwargs: Any,
) -> BatchResult:
    """``operation`` on each run, each in its own try and transaction: a refusal
    or a crash is kept against that run and the batch carries on (a crash, not
    a ``WeftError``, is also logged with its traceback). ``args`` and ``kwargs``
    go to each call (a signal's name and payload)."""
    function = operation_function(operation)
    reason = check_reason(reason)
    actor_name(by)  # a bad actor is refused before anything changes
    result = BatchResult(operation)
    for run_id in run_ids:
        try:
            function(run_id, *args, reason=reason, by=by, using=using, **kwargs)
        except Exception as exc:
            if not isinstance(exc, WeftError):
                logger.exception("%s failed on run %s", operation, run_id)
            result.failed.append((run_id, exc))
        else:
            result.done.append(run_id)
    return result
