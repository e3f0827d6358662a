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

from ..exceptions import (
    NonDeterminismError,
    QueryError,
    UpdateRejectedError,
    WorkflowNotFoundError,
    WorkflowNotRegisteredError,
)
from ..models import RunStatus, WorkflowEvent, db_for
from ..ownership import db_now
from . import registry
from .context import Context
from .port import Event, StopReplay
from .replay import Replay, undecodable_history
from .runs import load_run


class ReplayTurn:
    """The :class:`~.port.TurnPort` of a replay that must not write."""

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

    def check_halt(self) -> None:
        """A read-only replay is never halted (no host drives it)."""

    def _stop(self, *args: Any, **kwargs: Any) -> Any:
        raise StopReplay()

    pause = commit = commit_transactional = consume_signal = _stop
    child_outcome = start_child = claim_update = respond_update = _stop
    pending_updates = reject_update = apply_update = _stop


def replay_read_only(
    workflow_id: str, *, using: str | None = None, run: dict[str, Any] | None = None
) -> Replay:
    """Replay the run's history without writing; returns what the replay rebuilt.

    ``run`` is the row from :func:`load_run` when the caller has just read it.
    """
    using = db_for(using)
    if run is None:
        run = load_run(workflow_id, using=using)
    if run is None:
        raise WorkflowNotFoundError(workflow_id)
    if run["status"] == RunStatus.PENDING:
        raise QueryError(f"Workflow run {workflow_id!r} is pending: it has no state to query yet.")
    definition = registry.get(run["workflow_name"], run["workflow_version"])
    rows = (
        WorkflowEvent.objects.using(using)
        .filter(run_id=workflow_id)
        .order_by("seq")
        .values_list("seq", "kind", "name", "result", "error")
    )
    events = [Event(*row) for row in rows]
    unreadable = undecodable_history(run, events)
    if unreadable is not None:
        raise QueryError(f"Cannot replay {workflow_id!r} to answer: {unreadable}")
    replay = Replay(workflow_id, events, read_only=True)
    try:
        definition.fn(
            Context(ReplayTurn(run, definition, using), replay), *run["args"], **run["kwargs"]
        )
    except StopReplay:
        pass
    except NonDeterminismError as exc:
        raise QueryError(f"Cannot replay {workflow_id!r} to answer: {exc}") from exc
    except Exception:
        # The workflow failed in its recorded history (or raised while replaying
        # a terminal run): its handlers still reflect the state it reached.
        pass
    if replay.poisoned is not None:
        raise QueryError(f"Cannot replay {workflow_id!r} to answer: {replay.poisoned}")
    return replay


def run_query(workflow_id: str, name: str, *args: Any, using: str | None = None) -> Any:
    replay = replay_read_only(workflow_id, using=using)
    handler = replay.query_handlers.get(name)
    if handler is None:
        known = ", ".join(sorted(replay.query_handlers)) or "none"
        raise QueryError(
            f"Workflow run {workflow_id!r} has no query handler {name!r} (registered: {known})."
        )
    try:
        with replay.in_handler("query"):
            return handler(*args)
    except Exception as exc:
        raise QueryError(
            f"Query {name!r} of {workflow_id!r} raised {type(exc).__name__}: {exc}"
        ) from exc


def prevalidate_update(
    run: dict[str, Any], name: str, payload: Any, update_id: str | None, *, using: str | None
) -> None:
    """Run the update handler's validator now, if the run has registered it already.

    Raises ``UpdateRejectedError`` (with the message a rejection at delivery
    would give) so a rejected request is never stored.
    """
    try:
        replay = replay_read_only(run["id"], using=using, run=run)
    except (QueryError, WorkflowNotRegisteredError):
        return  # pending, or not replayable here: validated at delivery
    handler = replay.update_handlers.get(name)
    if handler is None or handler.validator is None:
        return
    try:
        with replay.in_handler("update"):
            handler.validator(payload)
    except Exception as exc:
        raise UpdateRejectedError(update_id or "(not stored)", str(exc)) from None
