"""Runs made from other runs, and a run's tree of descendants.

* A **retry** is a new run of the old run's workflow, version and arguments,
  with an empty history: it runs from the start on today's code.
* A **fork** is the same with the old run's history before its step ``N``
  (steps counted from 0: steps ``0 .. N-1`` and what was recorded between
  them are carried, step ``N`` and everything after it run again; a run that
  recorded exactly ``N`` steps is carried whole). What is carried is exactly what a
  replay needs to reach that point without doing anything again: step results
  (and recorded step failures), the values of ``ctx.now()``, ``ctx.uuid4()``
  and ``ctx.random()``, durable timers (``ctx.sleep``: their deadline has
  passed, so they return at once) and the signals the run consumed
  (``ctx.wait_for_signal``: the payload is in the history; a timed-out wait is
  carried as timed out). Anything else before step ``N`` -- a child workflow
  (its run belongs to the old parent), an update (handled or waited for: its
  caller was answered by the old run), a ``wait_until`` (its condition reads
  the state updates built) -- refuses the fork with
  :class:`~weft_django.exceptions.WorkflowForkError`, nothing stored.

The new run is inserted with its carried history in one transaction. A run
with history is never ``pending`` (the engine skips the history read of a
pending run's first turn), so a fork with history starts ``waiting``, due at
once (``wake_at`` and a wake hint) with its claim row released (epoch 1), as
a resumed run does; any worker that has the workflow takes it. Both are
top-level runs (no ``parent_id``): a parent waits on its own child's id,
never on a copy of it. ``origin_id`` and ``origin_step`` link the new run
to the old one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction

from ..exceptions import WorkflowAlreadyExistsError, WorkflowForkError
from ..models import RunStatus, WorkflowEvent, WorkflowRun, db_for
from ..ownership import busy_as_typed_error, db_now, revoke_statement
from .registry import resolve
from .runs import Within, is_duplicate_key
from .wakeups import notify

#: The statuses a run may be retried from.
RETRYABLE = frozenset({RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT})
#: The statuses a run may be forked from: finished, or suspended (e.g. stopped
#: by a non-determinism a fix has since removed). A live run is not: cancel or
#: suspend it first, so two runs never do the same work at once.
FORKABLE = frozenset({RunStatus.COMPLETED, *RETRYABLE, RunStatus.SUSPENDED})

#: The kinds of recorded events a fork carries.
CARRIED = frozenset({"step", "now", "uuid4", "random", "sleep", "signal", "retry_wait"})
#: Why each other kind of event refuses a fork.
NOT_CARRIED = {
    "child_start": "it started a child workflow",
    "child_result": "it waited for a child workflow",
    "update": "it applied an update",
    "update_wait": "it took an update with wait_for_update",
    "update_response": "it answered an update",
    "until": "it waited with wait_until",
}

#: Runs whose children are read per statement when walking a tree.
CHILDREN_CHUNK = 500


def carried_events(workflow_id: str, from_step: int, *, using: str) -> list[WorkflowEvent]:
    """The events of run ``workflow_id`` a fork from step ``from_step`` carries:
    every event before its step ``from_step`` (counted from 0), or its whole
    history when it recorded exactly ``from_step`` steps;
    :class:`WorkflowForkError` when they cannot be carried."""
    if isinstance(from_step, bool) or not isinstance(from_step, int) or from_step < 0:
        raise WorkflowForkError(workflow_id, from_step, "from_step is a step number, 0 or more")
    events = WorkflowEvent.objects.using(using).filter(run_id=workflow_id).order_by("seq")
    carried: list[WorkflowEvent] = []
    steps = 0
    for event in events.iterator(chunk_size=500):
        if event.kind == "step":
            if steps == from_step:
                return carried
            steps += 1
        refusal = _refusal(event)
        if refusal is not None:
            raise WorkflowForkError(
                workflow_id, from_step, f"before that step (event #{event.seq}) {refusal}"
            )
        carried.append(event)
    if steps == from_step:
        return carried
    raise WorkflowForkError(workflow_id, from_step, f"it recorded {steps} step(s)")


def _refusal(event: WorkflowEvent) -> str | None:
    if event.kind == "wait":
        # A wait's marker (it parked; the deadline): carried for signal waits only.
        if event.name.startswith("signal:"):
            return None
        target = event.name.split(":", 1)[0]
        return NOT_CARRIED.get(
            {"child": "child_result", "update": "update_wait"}.get(target, target),
            f"it waited on {target}",
        )
    if event.kind in CARRIED:
        return None
    return NOT_CARRIED.get(event.kind, f"it recorded a {event.kind!r} event")


def copy_run(
    old: WorkflowRun,
    new_id: str,
    carried: list[WorkflowEvent],
    *,
    from_step: int | None,
    within: Within | None = None,
    using: str | None = None,
) -> WorkflowRun:
    """Insert the new run made from ``old`` with the ``carried`` events, in one
    transaction (``within`` runs last in it: the audit record).
    ``WorkflowAlreadyExistsError`` when ``new_id`` is taken;
    ``WorkflowNotRegisteredError`` when the old run's workflow version is not
    registered here (its execution timeout is that version's)."""
    using = db_for(using)
    definition = resolve(old.workflow_name, old.workflow_version)
    try:
        with busy_as_typed_error(), transaction.atomic(using=using):
            now = db_now(using)
            run = WorkflowRun(
                id=new_id,
                workflow_name=old.workflow_name,
                # The old run's version, never the newest one registered.
                workflow_version=old.workflow_version,
                queue=old.queue,
                priority=old.priority,
                concurrency_key=old.concurrency_key,
                status=RunStatus.WAITING if carried else RunStatus.PENDING,
                args=old.args,
                kwargs=old.kwargs,
                created_at=now,
                updated_at=now,
                wake_at=now if carried else None,
                wake_hint_at=now if carried else None,
                started_at=now if carried else None,
                timeout_at=(
                    now + timedelta(seconds=definition.timeout)
                    if definition.timeout is not None
                    else None
                ),
                origin_id=old.pk,
                origin_step=from_step,
            )
            run.save(using=using, force_insert=True)
            WorkflowEvent.objects.using(using).bulk_create(
                [
                    WorkflowEvent(
                        run_id=new_id,
                        seq=event.seq,
                        kind=event.kind,
                        name=event.name,
                        result=event.result,
                        error=event.error,
                        created_at=event.created_at,
                    )
                    for event in carried
                ],
                batch_size=500,
            )
            if carried:
                # As resume leaves a run with history: its claim row released
                # stamped (the release rule), for any worker's reclaim or fast tick.
                revoke_statement(using, new_id, ended=False)
            if within is not None:
                within()
    except IntegrityError as exc:
        if not is_duplicate_key(exc):
            raise
        raise WorkflowAlreadyExistsError(new_id) from None
    notify(new_id, using=using)
    return run


def children_of(run_ids: list[str], *, using: str) -> Iterator[tuple[str, str]]:
    """``(id, status)`` of the runs started by ``run_ids`` (``ctx.start_child``),
    read off the parent index in chunks, in id order within each chunk."""
    for index in range(0, len(run_ids), CHILDREN_CHUNK):
        chunk = run_ids[index : index + CHILDREN_CHUNK]
        rows: Any = (
            WorkflowRun.objects.using(using)
            .filter(parent_id__in=chunk)
            .order_by("pk")
            .values_list("pk", "status")
        )
        yield from rows
