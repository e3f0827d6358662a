"""The boundary between a workflow's ``ctx`` and the turn that writes for it.

:class:`~.context.Context` (what workflow code calls) records and replays
operations; it reaches the database only through a :class:`TurnPort`, which
two classes implement: :class:`~.turn.Turn` (an owner's fenced writes) and
:class:`~.query.ReplayTurn` (a read-only replay for queries, which stops at
the first operation that would write). Neither side reads the other's
private state. The internal control-flow exceptions that cross the boundary
live here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from .registry import WorkflowDefinition


@dataclass
class Event:
    """One recorded operation of a run: its outcome, at sequence number ``seq``."""

    seq: int
    kind: str
    name: str
    result: Any = None
    error: Any = None

    def describe(self) -> str:
        return f"{self.kind}({self.name!r})" if self.name else self.kind


@dataclass(frozen=True)
class PendingUpdate:
    """An update request stored for a run and not yet applied."""

    pk: int
    update_id: str
    name: str
    payload: Any


class Park(BaseException):
    """Internal: unwind the turn; the run waits on ``waiting_on`` until ``wake_at``.

    A ``BaseException``, so a workflow's ``except Exception`` cannot swallow it.
    """

    def __init__(self, waiting_on: dict[str, Any], wake_at: datetime | None) -> None:
        super().__init__(waiting_on.get("kind", "wait"))
        self.waiting_on = waiting_on
        self.wake_at = wake_at


class StopReplay(BaseException):
    """Internal: a read-only replay reached the end of recorded history."""


#: :class:`Abandon`'s reason when the host's shutdown grace is over.
HALTED = "halted"


class Abandon(BaseException):
    """Internal: give the turn up without writing (deposed, shutting down, DB error,
    or :data:`HALTED`: the host stopped its turns at their next ``ctx`` operation)."""

    def __init__(self, reason: str, cause: BaseException | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cause = cause


class TurnPort(Protocol):
    """What a :class:`~.context.Context` needs from the turn it runs in.

    Error contract: a write that loses its fence, or meets a database error,
    raises :class:`Abandon`; a read-only turn raises :class:`StopReplay` from
    every write. Exceptions raised by user code passed in (a transactional
    step's function) propagate unchanged after the transaction rolled back.
    ``pending`` arguments are the buffered events that commit with the write.
    """

    run_id: str
    parent_id: str
    definition: WorkflowDefinition
    epoch: int
    read_only: bool

    def now(self) -> datetime:
        """The time for timers and deadlines (the database's clock)."""

    def check_halt(self) -> None:
        """Called at the start of every ``ctx`` operation: raise
        ``Abandon(HALTED)`` once the host has halted its turns (its shutdown
        grace is over), so the turn stops there without recording anything."""

    def pause(self, seconds: float) -> None:
        """Wait between step retries."""

    def commit(self, events: list[Event]) -> None:
        """Record ``events`` (fenced)."""

    def commit_transactional(
        self,
        pending: list[Event],
        event: Event,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run ``fn`` in the checkpoint's transaction; returns its encoded result."""

    def consume_signal(self, name: str, pending: list[Event], seq: int) -> Event | None:
        """Take the oldest buffered signal ``name`` (None: none buffered)."""

    def child_outcome(self, child_id: str, pending: list[Event], seq: int) -> Event | None:
        """Record the child's terminal outcome (None: not finished)."""

    def start_child(
        self,
        pending: list[Event],
        event: Event,
        definition: WorkflowDefinition,
        child_id: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> bool:
        """Create the child run with ``event``; False when the id was taken."""

    def pending_updates(self) -> list[PendingUpdate]:
        """The run's pending update requests, in arrival order."""

    def reject_update(self, pk: int, kind: str, message: str) -> None:
        """Answer a pending request with a rejection."""

    def apply_update(self, pk: int, pending: list[Event], event: Event) -> None:
        """Answer a pending request with ``event`` (its response or error) and record it."""

    def claim_update(self, name: str, pending: list[Event], seq: int) -> Event | None:
        """Hand the oldest pending request ``name`` to ``wait_for_update``."""

    def respond_update(self, pending: list[Event], event: Event) -> None:
        """Record ``update.respond(value)`` and answer the caller."""
