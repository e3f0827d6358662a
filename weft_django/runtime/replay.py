"""The replay machinery of one turn: recorded history, the write buffer, handlers.

A :class:`Replay` is what the engine, the update delivery and read-only
queries work with; workflow code sees it only through
:class:`~.context.Context`. Every durable operation takes the next sequence
number; when history holds an event there, the operation gets the recorded
outcome (after checking that kind and name match, else
:class:`~weft_django.exceptions.NonDeterminismError`). Applied updates are
history events too, re-applied in order as replay passes them, so the state
their handlers build is rebuilt deterministically.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..exceptions import HandlerError, NonDeterminismError, PayloadError
from ..stored_json import UndecodableJSON
from .port import Event, StopReplay


@dataclass(frozen=True)
class UpdateHandler:
    fn: Callable[[Any], Any]
    validator: Callable[[Any], Any] | None = None


class Replay:
    """History, position and buffer of one turn, and the handlers registered so far."""

    def __init__(self, workflow_id: str, events: list[Event], *, read_only: bool = False) -> None:
        self.workflow_id = workflow_id
        self.events = events
        self.read_only = read_only
        self.pos = 0
        self.buffer: list[Event] = []
        # Set at the first mismatch: the engine checks it after the workflow
        # function returns, so ``except Exception`` in workflow code cannot hide it.
        self.poisoned: NonDeterminismError | None = None
        self.update_handlers: dict[str, UpdateHandler] = {}
        self.query_handlers: dict[str, Callable[..., Any]] = {}
        #: The name a ``wait_for_update`` in progress waits for (delivery stops there).
        self.waiting_update: str | None = None
        #: The predicate of the ``wait_until`` in progress: delivery stops as soon
        #: as an applied update makes it true (it is re-checked after each one).
        self.until: Callable[[], bool] | None = None
        self._handler_kind: str | None = None
        #: change id -> what ``ctx.patched`` answered in this run (:mod:`.patches`).
        self.patches: dict[str, bool] = {}
        for index, event in enumerate(events):
            if event.seq != index:
                self.poisoned = NonDeterminismError(
                    workflow_id, index, f"event #{index}", f"event #{event.seq} (a gap)"
                )
                break

    @property
    def is_replaying(self) -> bool:
        return self.pos < len(self.events)

    @property
    def next_seq(self) -> int:
        return len(self.events) + len(self.buffer)

    @contextmanager
    def in_handler(self, kind: str) -> Iterator[None]:
        """Run an update/query handler or validator: no durable operation inside."""
        self._handler_kind = kind
        try:
            yield
        finally:
            self._handler_kind = None

    def peek(self) -> Event | None:
        """The recorded event at the current position (None: live from here)."""
        if self._handler_kind is not None:
            raise HandlerError(
                f"{self._handler_kind} handlers of {self.workflow_id!r} must not call ctx "
                "operations (step, sleep, waits, now, ...): they run synchronously at "
                "delivery and on every replay; do durable work in the workflow body."
            )
        if self.poisoned is not None:
            raise self.poisoned
        while self.pos < len(self.events) and self.events[self.pos].kind == "update":
            self._replay_update(self.events[self.pos])
            self.pos += 1
        if self.pos < len(self.events):
            return self.events[self.pos]
        if self.read_only:
            raise StopReplay()
        return None

    def _replay_update(self, event: Event) -> None:
        """Re-apply an update recorded here, so handler state is rebuilt in order."""
        handler = self.update_handlers.get(event.name)
        if handler is None:
            raise self.mismatch(f"a handler for update {event.name!r}", event)
        try:
            with self.in_handler("update"):
                handler.fn((event.result or {}).get("payload"))
        except Exception:
            if event.error is None:
                raise
            # It raised when first applied too; the failure was reported then.

    def mismatch(self, expected: str, found: Event) -> NonDeterminismError:
        """The error for a recorded event that is not what the code asks for now."""
        error = NonDeterminismError(self.workflow_id, found.seq, expected, found.describe())
        if self.poisoned is None:
            self.poisoned = error
        return error

    def take(self, kind: str, name: str) -> Event | None:
        """The recorded event of this operation, consumed (None: run it live)."""
        event = self.peek()
        if event is None:
            return None
        if event.kind != kind or event.name != name:
            raise self.mismatch(Event(0, kind, name).describe(), event)
        self.pos += 1
        return event

    def advance(self) -> None:
        """Step past the event :meth:`peek` returned (its caller has checked it)."""
        self.pos += 1

    def new(self, kind: str, name: str, result: Any = None, error: Any = None) -> Event:
        return Event(self.next_seq, kind, name, result, error)

    def pending(self) -> list[Event]:
        """A copy of the buffered events (they commit with the next write)."""
        return list(self.buffer)

    def committed(self, events: list[Event]) -> None:
        """Events just written are history now: later operations number after them."""
        self.buffer = []
        self.events.extend(events)
        self.pos = len(self.events)

    def take_buffer(self) -> list[Event]:
        buffered, self.buffer = self.buffer, []
        return buffered

    def check_replayed_to_end(self, failure: BaseException | None) -> None:
        """The function ended: history it did not replay means the code diverged.

        Without this a deploy that returns (or raises) before an operation the
        run had already recorded would commit a result over that history.
        """
        rest = [event for event in self.events[self.pos :] if event.kind != "update"]
        if rest:
            ending = "returns" if failure is None else f"raises {type(failure).__name__}"
            self.mismatch(f"no more operations (the workflow now {ending})", rest[0])


def undecodable_history(run: dict[str, Any], events: list[Event]) -> PayloadError | None:
    """The error for a run whose arguments or recorded history hold stored JSON
    weft does not decode (:class:`~weft_django.stored_json.UndecodableJSON`:
    written before the depth limit, or by hand); None when all of it decodes."""
    found: list[tuple[str, UndecodableJSON]] = [
        (f"{name} of run {run['id']!r}", run[name])
        for name in ("args", "kwargs")
        if isinstance(run.get(name), UndecodableJSON)
    ]
    found += [
        (f"{field} of event #{event.seq} ({event.kind} {event.name!r}) of run {run['id']!r}", value)
        for event in events
        for field, value in (("result", event.result), ("error", event.error))
        if isinstance(value, UndecodableJSON)
    ]
    if not found:
        return None
    what, value = found[0]
    return PayloadError(what, f"the stored JSON cannot be decoded: {value.reason}")
