"""Recovering failed work, audited as every operator action is: retry a run,
fork it from a step, cancel it with its descendants.

The verbs ``weft.retry``, ``weft.fork`` and ``weft.cancel(children=True)``,
the admin's run page and ``manage.py weft`` all call these functions, so each
is recorded the same way as :mod:`weft_django.operations`' (a log line on
``weft_django.operations``, and a Django admin ``LogEntry`` for a user, in
the operation's own transaction). What a retry and a fork carry over is
:mod:`weft_django.runtime.recovery`'s docstring (docs/workflows.md, "Retry and
fork").

This module sits in the public layer beside :mod:`weft_django.operations`,
which it builds on; ``api`` calls it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from .exceptions import WorkflowNotFoundError, WorkflowTerminalError
from .models import TERMINAL_STATUSES, WorkflowRun, db_for
from .operations import MAX_REASON_LENGTH, Audit, cancel, check_reason
from .runtime.payload import check_id
from .runtime.recovery import FORKABLE, RETRYABLE, carried_events, children_of, copy_run


def _old_run(workflow_id: str, using: str) -> WorkflowRun:
    check_id(workflow_id)
    run = WorkflowRun.objects.using(using).filter(pk=workflow_id).first()
    if run is None:
        raise WorkflowNotFoundError(workflow_id)
    return run


def _new_id(new_id: str | None) -> str:
    return check_id(new_id, "new_id") if new_id is not None else uuid.uuid4().hex


def retry(
    workflow_id: str,
    *,
    new_id: str | None = None,
    reason: str | None = None,
    by: Any = None,
    using: str | None = None,
) -> str:
    """Start a new run of a failed, cancelled or timed-out run's workflow, with
    its version and arguments and an empty history; returns the new run's id
    (``new_id``, default a random hex id). ``WorkflowTerminalError`` for a run
    in another status (nothing stored)."""
    using = db_for(using)
    old = _old_run(workflow_id, using)
    if old.status not in RETRYABLE:
        raise WorkflowTerminalError(workflow_id, old.status, wanted="retried")
    new_id = _new_id(new_id)
    audit = Audit("retry", workflow_id, by, check_reason(reason), detail=f" as {new_id}")
    copy_run(old, new_id, [], from_step=None, within=audit.entry_writer(using), using=using)
    audit.log()
    return new_id


def fork(
    workflow_id: str,
    from_step: int,
    *,
    new_id: str | None = None,
    reason: str | None = None,
    by: Any = None,
    using: str | None = None,
) -> str:
    """Start a new run carrying a finished or suspended run's history up to its
    step ``from_step`` (steps ``0 .. from_step-1`` are not run again); returns
    the new run's id. ``WorkflowTerminalError`` for a live run,
    ``WorkflowForkError`` when the history cannot be carried (nothing stored)."""
    using = db_for(using)
    old = _old_run(workflow_id, using)
    if old.status not in FORKABLE:
        raise WorkflowTerminalError(workflow_id, old.status, wanted="forked")
    carried = carried_events(workflow_id, from_step, using=using)
    new_id = _new_id(new_id)
    audit = Audit(
        "fork",
        workflow_id,
        by,
        check_reason(reason),
        detail=f" from step {from_step} as {new_id}",
    )
    copy_run(
        old, new_id, carried, from_step=from_step, within=audit.entry_writer(using), using=using
    )
    audit.log()
    return new_id


@dataclass
class TreeCancel:
    """What :func:`cancel_tree` did: the runs cancelled (the root first, then
    level by level) and the descendants it could not cancel (with the error)."""

    cancelled: list[str] = field(default_factory=list)
    failed: list[tuple[str, BaseException]] = field(default_factory=list)


def cancel_tree(
    workflow_id: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> TreeCancel:
    """Cancel a run and then its unfinished descendants, level by level.

    Each run is cancelled by :func:`weft_django.operations.cancel` (its own
    transaction: epoch rotated, holder dropped, recorded with ``reason`` and
    ``by``). The root's refusal (``WorkflowTerminalError``, ...) is raised with
    nothing changed. A level's children are read after every run of the level
    is cancelled, so a run cannot start a child the walk misses (its fenced
    ``start_child`` write fails once its epoch is rotated); finished runs are
    walked through too (a finished child's own children may still run). A
    descendant that finished meanwhile is skipped; one that could not be
    cancelled (``WorkflowBusyError``) is kept in ``failed`` and the walk carries on.
    """
    using = db_for(using)
    reason = check_reason(reason)
    cancel(workflow_id, reason=reason, by=by, using=using)
    outcome = TreeCancel(cancelled=[workflow_id])
    # Each descendant's recorded reason names the root (cut to the limit).
    child_reason = f"{reason or 'a descendant'} (with {workflow_id})"[:MAX_REASON_LENGTH]
    seen = {workflow_id}
    level = [workflow_id]
    while level:
        children = [
            (pk, status) for pk, status in children_of(level, using=using) if pk not in seen
        ]
        seen.update(pk for pk, _status in children)
        for pk, status in children:
            if status in TERMINAL_STATUSES:
                continue
            try:
                cancel(pk, reason=child_reason, by=by, using=using)
            except WorkflowTerminalError as exc:
                if exc.status not in TERMINAL_STATUSES:
                    outcome.failed.append((pk, exc))
            except Exception as exc:
                outcome.failed.append((pk, exc))
            else:
                outcome.cancelled.append(pk)
        level = [pk for pk, _status in children]
    return outcome
