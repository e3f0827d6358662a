"""``weft.start_many``: many runs started in one statement per chunk, with one wake-up."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..exceptions import StartManyError, WorkflowAlreadyExistsError
from ..flow.settings import check_key, check_priority, check_queue
from ..models import db_for
from ..ownership import busy_as_typed_error
from ..runtime import registry
from ..runtime.runs import Flow
from ..runtime.starts import NewRun, insert_runs, prepare_run
from .runs import WorkflowHandle


@dataclass(frozen=True)
class StartRequest:
    """One run for :func:`start_many`: what ``weft.start(workflow, *args,
    workflow_id=..., start_at=..., version=..., queue=..., priority=...,
    concurrency_key=..., **kwargs)`` would be given.

    ``workflow`` is a registered name or a decorated function; ``args`` a
    sequence of positional arguments; ``kwargs`` the keyword arguments (a
    keyword named ``workflow_id``, ``start_at``, ``version`` or ``using`` goes to the
    workflow here, unlike with :func:`start`)."""

    workflow: str | Callable[..., Any]
    """The workflow: a registered name or the decorated function."""
    args: Sequence[Any] = ()
    """The workflow's positional arguments."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """The workflow's keyword arguments."""
    workflow_id: str | None = None
    """The run's id (default: a random hex id), as for :func:`start`."""
    start_at: datetime | None = None
    """When the run may start (timezone-aware), as for :func:`start`."""
    version: int | None = None
    """The workflow version (default: the highest registered here), as for :func:`start`."""
    queue: str | None = None
    """The flow-control queue (default: the workflow's), as for :func:`start`."""
    priority: int = 0
    """-100 to 100, higher first, as for :func:`start`."""
    concurrency_key: str | None = None
    """The key the queue's per-key limits count by, as for :func:`start`."""


StartOutcome = WorkflowHandle | WorkflowAlreadyExistsError


def start_many(requests: Iterable[StartRequest], *, using: str | None = None) -> list[StartOutcome]:
    """Start many runs at once: one statement per 1,000 runs, one wake-up for all.

    Every request is validated first, by the rules of :func:`start`; when any
    is invalid, :class:`~weft_django.StartManyError` is raised with the error of
    each invalid request by its index (``errors``) and **nothing is written**.
    Otherwise every run is written in one transaction (the caller's, if any):
    all of them or, if the database refuses the write, none.

    Returns one entry per request, in order: the run's :class:`WorkflowHandle`,
    or a :class:`~weft_django.WorkflowAlreadyExistsError` (not raised) when its
    ``workflow_id`` already had a run, or repeated an earlier request's of this
    call; those are skipped, the others started. Inside the caller's
    ``atomic()``, a rollback takes every run and the wake-up with it.
    """
    alias = db_for(using)
    rows: list[NewRun] = []
    errors: dict[int, Exception] = {}
    for index, request in enumerate(requests):
        try:
            if not isinstance(request, StartRequest):
                raise TypeError(
                    f"start_many takes StartRequest items, not {type(request).__name__}"
                )
            definition = registry.resolve(request.workflow, request.version)
            queue = request.queue if request.queue is not None else definition.queue
            flow = Flow(
                queue=check_queue(queue),
                priority=check_priority(request.priority),
                concurrency_key=check_key(request.concurrency_key),
            )
            rows.append(
                prepare_run(
                    definition,
                    tuple(request.args),
                    dict(request.kwargs),
                    workflow_id=request.workflow_id,
                    start_at=request.start_at,
                    flow=flow,
                )
            )
        except (ValueError, TypeError, LookupError) as exc:  # the typed errors of start()
            errors[index] = exc
    if errors:
        raise StartManyError(errors)
    seen: set[str] = set()
    fresh: list[NewRun] = []
    for row in rows:
        if row.id not in seen:
            seen.add(row.id)
            fresh.append(row)
    with busy_as_typed_error():
        inserted = set(insert_runs(fresh, using=alias))
    outcomes: list[StartOutcome] = []
    for row in rows:
        if row.id in inserted:
            inserted.discard(row.id)  # a repeat later in the list is a duplicate
            outcomes.append(WorkflowHandle(row.id, using=using))
        else:
            outcomes.append(WorkflowAlreadyExistsError(row.id))
    return outcomes


__all__ = ["StartOutcome", "StartRequest", "start_many"]
