"""Read-only replay: answer queries (and pre-validate updates) from any process.

The run's recorded history is replayed with a :class:`ReplayTurn`, which
stops the replay at the first operation that has no recorded outcome and
refuses every write, so no step runs and nothing is stored. The handlers the
workflow registered along the way (``ctx.on_query``, ``ctx.on_update``) are
then available with the state the history rebuilt.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q

from ..exceptions import NonDeterminismError, QueryError, WorkflowNotFoundError
from ..models import RunStatus, WorkflowEvent, WorkflowRun
from ..ownership.clock import db_now
from . import registry
from .context import Context, Event, StopReplay


class ReplayTurn:
    """The write side of a turn, for a replay that must not write."""

    read_only = True
    epoch = 0

    def __init__(self, run: dict[str, Any], definition: registry.WorkflowDefinition, using: str):
        self.run_id: str = run["id"]
        self.parent_id: str = run.get("parent_id") or ""
        self.definition = definition
        self.using = using
        self._now: datetime | None = None

    def now(self) -> datetime:
        if self._now is None:
            self._now = db_now(self.using)
        return self._now

    def _stop(self, *args: Any, **kwargs: Any) -> Any:
        raise StopReplay()

    pause = commit = commit_transactional = consume_signal = _stop
    child_outcome = start_child = drain_updates = claim_update = respond_update = _stop


RUN_FIELDS = ("id", "workflow_name", "status", "args", "kwargs", "parent_id")


def load_run(workflow_id: str, *, using: str = "default") -> dict[str, Any] | None:
    """The run row fields a read-only replay needs (None when there is no such run)."""
    return WorkflowRun.objects.using(using).filter(pk=workflow_id).values(*RUN_FIELDS).first()


def replay_read_only(
    workflow_id: str, *, using: str = "default", run: dict[str, Any] | None = None
) -> tuple[Context, dict[str, Any]]:
    """Replay the run's history without writing; returns its context and run row.

    ``run`` is the row from :func:`load_run` when the caller has just read it.
    """
    if run is None:
        run = load_run(workflow_id, using=using)
    if run is None:
        raise WorkflowNotFoundError(workflow_id)
    if run["status"] == RunStatus.PENDING:
        raise QueryError(f"Workflow run {workflow_id!r} is pending: it has no state to query yet.")
    definition = registry.get(run["workflow_name"])
    rows = (
        WorkflowEvent.objects.using(using)
        .filter(Q(run_id=workflow_id))
        .order_by("seq")
        .values_list("seq", "kind", "name", "result", "error")
    )
    ctx = Context(ReplayTurn(run, definition, using), [Event(*row) for row in rows])  # type: ignore[arg-type]
    try:
        definition.fn(ctx, *run["args"], **run["kwargs"])
    except StopReplay:
        pass
    except NonDeterminismError as exc:
        raise QueryError(f"Cannot replay {workflow_id!r} to answer: {exc}") from exc
    except Exception:
        # The workflow failed in its recorded history (or raised while replaying
        # a terminal run): its handlers still reflect the state it reached.
        pass
    if ctx._poisoned is not None:
        raise QueryError(f"Cannot replay {workflow_id!r} to answer: {ctx._poisoned}")
    return ctx, run


def run_query(workflow_id: str, name: str, *args: Any, using: str = "default") -> Any:
    ctx, _run = replay_read_only(workflow_id, using=using)
    handler = ctx._query_handlers.get(name)
    if handler is None:
        known = ", ".join(sorted(ctx._query_handlers)) or "none"
        raise QueryError(
            f"Workflow run {workflow_id!r} has no query handler {name!r} (registered: {known})."
        )
    try:
        with ctx.in_handler("query"):
            return handler(*args)
    except Exception as exc:
        raise QueryError(
            f"Query {name!r} of {workflow_id!r} raised {type(exc).__name__}: {exc}"
        ) from exc
