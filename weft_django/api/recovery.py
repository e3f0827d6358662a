"""The recovery verbs: ``retry`` a failed run, ``fork`` a run from a step.

Both start a new run linked to the old one (``origin_id``; the run page and
``manage.py weft describe`` show it) and return its :class:`WorkflowHandle`;
both are audited as the operator verbs are (:mod:`weft_django.recovery`).
"""

from __future__ import annotations

from typing import Any

from .. import recovery
from .runs import WorkflowHandle


def retry(
    workflow_id: str,
    *,
    new_id: str | None = None,
    reason: str | None = None,
    by: Any = None,
    using: str | None = None,
) -> WorkflowHandle:
    """Run a failed, cancelled or timed-out run again, as a new run.

    The new run (id ``new_id``, default a random hex id) has the old run's
    workflow, version and arguments and an empty history: it runs from the
    start, on the code deployed now. It is a top-level run (a retried child is
    not waited for by its parent) and records ``origin_id`` = the old run's id.
    The workflow must be registered in the calling process
    (``WorkflowNotRegisteredError``; its execution timeout applies).

    ``WorkflowTerminalError`` when the run is in another status (pending,
    running, waiting, suspended or completed), ``WorkflowNotFoundError`` when
    there is no such run, ``WorkflowAlreadyExistsError`` when ``new_id`` is
    taken; nothing is stored then. ``reason`` and ``by`` are recorded as for
    :func:`~weft_django.cancel` (a log line; a user gets a ``LogEntry`` on the
    old run).
    """
    new = recovery.retry(workflow_id, new_id=new_id, reason=reason, by=by, using=using)
    return WorkflowHandle(new, using=using)


def fork(
    workflow_id: str,
    from_step: int,
    *,
    new_id: str | None = None,
    reason: str | None = None,
    by: Any = None,
    using: str | None = None,
) -> WorkflowHandle:
    """Run a finished or suspended run again from its step ``from_step``.

    The new run carries the old run's history before its step ``from_step``
    (steps counted from 0: steps ``0 .. from_step-1`` replay their recorded
    results and are not run again; step ``from_step`` and everything after it
    run on the code deployed now): the step results, and the recorded
    ``ctx.now()``, ``ctx.uuid4()``, ``ctx.random()`` values, timers and
    consumed signals before that step (docs/workflows.md, "Retry and fork").
    A run that recorded exactly ``from_step`` steps is carried whole.
    Otherwise as :func:`retry` (``origin_step`` records ``from_step``).

    ``WorkflowForkError`` (a ``ValueError``) when the run recorded fewer than
    ``from_step`` steps or its history before that step holds a child
    workflow, an update or a ``wait_until``; ``WorkflowTerminalError`` when the
    run is still pending, running or waiting (cancel or suspend it first);
    nothing is stored then.
    """
    new = recovery.fork(workflow_id, from_step, new_id=new_id, reason=reason, by=by, using=using)
    return WorkflowHandle(new, using=using)


__all__ = ["fork", "retry"]
