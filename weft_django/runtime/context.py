"""The ``ctx`` a workflow receives: durable operations recorded and replayed.

Every durable operation takes the next sequence number. When history already
holds an event at that number, the operation returns the recorded outcome
(after checking that the event's kind and name match, else
:class:`NonDeterminismError`); otherwise it executes and records. Operations
that cannot complete now park the turn by raising :class:`Park`, a
``BaseException`` that user ``except Exception`` blocks cannot swallow.

Waits are recorded as an optional ``wait`` marker (only when the operation
had to park; it stores the deadline) followed by the final event.
"""

from __future__ import annotations

import logging
import random as _random
import uuid as _uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils.dateparse import parse_datetime

from ..exceptions import (
    HandlerError,
    NonDeterminismError,
    PayloadError,
    StepFailedError,
    WaitTimeoutError,
    WorkflowAlreadyExistsError,
    WorkflowCancelledError,
    WorkflowFailedError,
)
from .payload import encode, error_info
from .policy import RetryPolicy, as_seconds

if TYPE_CHECKING:
    from .turn import Turn


class Park(BaseException):
    """Internal: unwind the turn; the run waits on ``waiting_on`` until ``wake_at``."""

    def __init__(self, waiting_on: dict[str, Any], wake_at: datetime | None) -> None:
        super().__init__(waiting_on.get("kind", "wait"))
        self.waiting_on = waiting_on
        self.wake_at = wake_at


UPDATE_DRIVEN_WAITS = frozenset({"until", "update"})


class StopReplay(BaseException):
    """Internal: a read-only replay reached the end of recorded history."""


class Abandon(BaseException):
    """Internal: give the turn up without writing (deposed, shutting down, DB error)."""

    def __init__(self, reason: str, cause: BaseException | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cause = cause


@dataclass
class Event:
    seq: int
    kind: str
    name: str
    result: Any = None
    error: Any = None

    def describe(self) -> str:
        return f"{self.kind}({self.name!r})" if self.name else self.kind


@dataclass(frozen=True)
class UpdateHandler:
    fn: Callable[[Any], Any]
    validator: Callable[[Any], Any] | None = None


class Update:
    """An update request handed to ``ctx.wait_for_update``."""

    def __init__(self, ctx: Context, name: str, update_id: str, payload: Any) -> None:
        self._ctx = ctx
        self.name = name
        self.update_id = update_id
        self.payload = payload

    def respond(self, value: Any = None) -> None:
        """Answer the caller (effective once; a replayed or repeated call is a no-op)."""
        self._ctx._respond(self, value)

    def __repr__(self) -> str:
        return f"<Update {self.name!r} {self.update_id!r}>"


@dataclass
class ChildHandle:
    """A child workflow started with ``ctx.start_child``."""

    id: str
    _ctx: Context = field(repr=False)

    def result(self, timeout: float | timedelta | None = None) -> Any:
        """Durably wait for the child's terminal state (reached on any worker)."""
        return self._ctx._wait_child(self.id, timeout)


class _ReplayAwareLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    def __init__(self, ctx: Context) -> None:
        super().__init__(logging.getLogger(f"weft_django.workflow.{ctx.workflow_name}"), {})
        self.ctx = ctx

    def isEnabledFor(self, level: int) -> bool:
        return not self.ctx.is_replaying and self.logger.isEnabledFor(level)

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"[{self.ctx.workflow_id}] {msg}", kwargs


def _fn_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{qualname}" if module else qualname


def _iso(value: datetime) -> str:
    return value.isoformat()


def _parse(value: str | None) -> datetime | None:
    return parse_datetime(value) if value else None


class Context:
    """The workflow's view of its run. Created per turn; holds nothing durable."""

    def __init__(self, turn: Turn, events: list[Event]) -> None:
        self._turn = turn
        self._events = events
        self._pos = 0
        self._buffer: list[Event] = []
        self.workflow_id: str = turn.run_id
        self.workflow_name: str = turn.definition.name
        self.workflow_version: int = turn.definition.version
        self.parent_id: str | None = turn.parent_id or None
        # Set when replay finds a mismatch: the engine checks it after the
        # workflow function returns, so ``except Exception`` cannot hide it.
        self._poisoned: NonDeterminismError | None = None
        self._update_handlers: dict[str, UpdateHandler] = {}
        self._query_handlers: dict[str, Callable[..., Any]] = {}
        self._responded: set[str] = set()
        self._waiting_update: str | None = None
        self._handler_kind: str | None = None
        # The predicate of the wait_until in progress: draining stops as soon as
        # an applied update makes it true (it is re-checked after each one).
        self._until: Callable[[], bool] | None = None

    # -- identity ---------------------------------------------------------------

    @property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger that stays quiet while the run replays recorded history."""
        return _ReplayAwareLogger(self)

    @property
    def is_replaying(self) -> bool:
        return self._pos < len(self._events)

    @property
    def epoch(self) -> int:
        return self._turn.epoch

    # -- replay machinery -------------------------------------------------------

    def _next_seq(self) -> int:
        return len(self._events) + len(self._buffer)

    @contextmanager
    def in_handler(self, kind: str) -> Iterator[None]:
        """Run an update/query handler or validator: no durable operation inside."""
        self._handler_kind = kind
        try:
            yield
        finally:
            self._handler_kind = None

    def _peek(self) -> Event | None:
        if self._handler_kind is not None:
            raise HandlerError(
                f"{self._handler_kind} handlers of {self.workflow_id!r} must not call ctx "
                "operations (step, sleep, waits, now, ...): they run synchronously at "
                "delivery and on every replay; do durable work in the workflow body."
            )
        if self._poisoned is not None:
            raise self._poisoned
        while self._pos < len(self._events) and self._events[self._pos].kind == "update":
            self._replay_update(self._events[self._pos])
            self._pos += 1
        if self._pos < len(self._events):
            return self._events[self._pos]
        if getattr(self._turn, "read_only", False):
            raise StopReplay()
        return None

    def _replay_update(self, event: Event) -> None:
        """Re-apply an update recorded here, so handler state is rebuilt in order."""
        handler = self._update_handlers.get(event.name)
        if handler is None:
            raise self._mismatch(f"a handler for update {event.name!r}", event)
        try:
            with self.in_handler("update"):
                handler.fn((event.result or {}).get("payload"))
        except Exception:
            if event.error is None:
                raise
            # It raised when first applied too; the failure was reported then.

    def _mismatch(self, expected: str, found: Event) -> NonDeterminismError:
        error = NonDeterminismError(self.workflow_id, found.seq, expected, found.describe())
        if self._poisoned is None:
            self._poisoned = error
        return error

    def _take(self, kind: str, name: str) -> Event | None:
        event = self._peek()
        if event is None:
            return None
        if event.kind != kind or event.name != name:
            raise self._mismatch(Event(0, kind, name).describe(), event)
        self._pos += 1
        return event

    def _new(self, kind: str, name: str, result: Any = None, error: Any = None) -> Event:
        return Event(self._next_seq(), kind, name, result, error)

    def _record(self, event: Event) -> None:
        """Commit buffered events plus ``event`` in one fenced transaction."""
        events = [*self._buffer, event]
        self._turn.commit(events)
        self._committed(events)

    def _committed(self, events: list[Event]) -> None:
        """Events just written are history now: later operations number after them."""
        self._buffer = []
        self._events.extend(events)
        self._pos = len(self._events)

    def _take_buffer(self) -> list[Event]:
        buffered, self._buffer = self._buffer, []
        return buffered

    def _check_replayed_to_end(self, failure: BaseException | None) -> None:
        """The function ended: history it did not replay means the code diverged.

        Without this a deploy that returns (or raises) before an operation the
        run had already recorded would commit a result over that history.
        """
        rest = [event for event in self._events[self._pos :] if event.kind != "update"]
        if rest:
            ending = "returns" if failure is None else f"raises {type(failure).__name__}"
            self._mismatch(f"no more operations (the workflow now {ending})", rest[0])

    def _now(self) -> datetime:
        return self._turn.now()

    # -- steps ------------------------------------------------------------------

    def step(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        transactional: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn`` once; its JSON result is checkpointed and replayed."""
        step_name = name or _fn_name(fn)
        recorded = self._take("step", step_name)
        if recorded is not None:
            if recorded.error is not None:
                raise StepFailedError(
                    step_name,
                    recorded.error.get("type", "Error"),
                    recorded.error.get("message", ""),
                )
            return recorded.result
        policy = retry or RetryPolicy(max_attempts=1)
        attempt = 0
        while True:
            attempt += 1
            event = self._new("step", step_name)
            try:
                if transactional:
                    value = self._turn.commit_transactional(
                        list(self._buffer), event, fn, args, kwargs
                    )
                    self._committed([*self._buffer, event])
                    return value
                value = encode(fn(*args, **kwargs), f"result of step {step_name!r}")
            except (Park, Abandon):
                raise
            except Exception as exc:
                if isinstance(exc, PayloadError) and exc.what == f"result of step {step_name!r}":
                    raise  # a non-JSON result: a programming error, never retried or recorded
                if attempt < policy.max_attempts and not isinstance(exc, policy.non_retryable):
                    self._turn.pause(policy.interval(attempt))
                    continue
                info = error_info(exc, with_traceback=False)
                info["attempts"] = attempt
                event.error = info
                self._record(event)
                raise StepFailedError(step_name, info["type"], info["message"]) from exc
            event.result = value
            self._record(event)
            return value

    # -- recorded values ----------------------------------------------------------

    def _recorded_value(self, kind: str, make: Callable[[], Any]) -> Any:
        recorded = self._take(kind, "")
        if recorded is not None:
            return recorded.result
        value = make()
        self._buffer.append(self._new(kind, "", value))
        return value

    def now(self) -> datetime:
        """The current time, recorded: identical on replay."""
        value = self._recorded_value("now", lambda: _iso(self._now()))
        return _parse(value)  # type: ignore[return-value]

    def uuid4(self) -> _uuid.UUID:
        return _uuid.UUID(self._recorded_value("uuid4", lambda: str(_uuid.uuid4())))

    def random(self) -> float:
        """A float in [0, 1), recorded: identical on replay."""
        return float(self._recorded_value("random", _random.random))

    # -- timers -----------------------------------------------------------------

    def sleep(self, duration: float | int | timedelta) -> None:
        """A durable timer: the run parks and wakes at the deadline, on any worker."""
        seconds = as_seconds(duration, "sleep duration") or 0.0
        recorded = self._take("sleep", "")
        if recorded is not None:
            until = _parse(recorded.result["until"]) or self._now()
            if self._peek() is not None:
                return  # later history exists: the timer fired in the original run
        else:
            until = self._now() + timedelta(seconds=max(seconds, 0.0))
            self._buffer.append(self._new("sleep", "", {"until": _iso(until)}))
        if self._now() >= until:
            return
        self._deliver_updates()
        raise Park({"kind": "sleep", "until": _iso(until)}, until)

    # -- waits ------------------------------------------------------------------

    def _wait(
        self,
        key: str,
        final_kind: str,
        final_name: str,
        timeout: float | timedelta | None,
        poll: Callable[[list[Event], int], Event | None],
        waiting_on: dict[str, Any],
    ) -> Event:
        """Shared wait protocol: returns the final event (replayed or recorded now)."""
        seconds = as_seconds(timeout, "timeout")
        event = self._peek()
        deadline: datetime | None = None
        marker: Event | None = None
        if event is not None and event.kind == final_kind and event.name == final_name:
            self._pos += 1
            return event
        if event is not None and event.kind == "wait" and event.name == key:
            self._pos += 1
            deadline = _parse((event.result or {}).get("deadline"))
            event = self._peek()
            if event is not None:
                if event.kind == final_kind and event.name == final_name:
                    self._pos += 1
                    return event
                raise self._mismatch(f"{final_kind}({final_name!r})", event)
        elif event is not None:
            raise self._mismatch(f"wait({key!r})", event)
        else:
            if seconds is not None:
                deadline = self._now() + timedelta(seconds=max(seconds, 0.0))
            marker = self._new("wait", key, {"deadline": _iso(deadline) if deadline else None})
        # Live: try to complete now. The final event commits with the buffer; the
        # marker is needed only when the run parks (it carries the deadline).
        done = poll(self._buffer, self._next_seq())
        if done is None and self._deliver_updates() and waiting_on["kind"] in UPDATE_DRIVEN_WAITS:
            # Applied updates may have satisfied a predicate or brought the update
            # waited for; they cannot bring a signal or finish a child.
            done = poll(self._buffer, self._next_seq())
        if done is not None:
            self._committed([*self._buffer, done])
            return done
        if marker is not None:
            marker.seq = self._next_seq()
            self._buffer.append(marker)
        if deadline is not None and self._now() >= deadline:
            timed_out = self._new(final_kind, final_name, None, {"timeout": True})
            self._record(timed_out)
            return timed_out
        info = dict(waiting_on)
        info["deadline"] = _iso(deadline) if deadline else None
        raise Park(info, deadline)

    def wait_for_signal(self, name: str, timeout: float | timedelta | None = None) -> Any:
        """The oldest buffered, unconsumed signal ``name``, consumed exactly once."""
        final = self._wait(
            f"signal:{name}",
            "signal",
            name,
            timeout,
            lambda pending, seq: self._turn.consume_signal(name, pending, seq),
            {"kind": "signal", "name": name},
        )
        if final.error is not None:
            raise WaitTimeoutError(f"No signal {name!r} arrived within the timeout.")
        return final.result

    # -- updates and queries ------------------------------------------------------

    def on_update(
        self, name: str, validator: Callable[[Any], Any] | None = None
    ) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
        """Register a synchronous update handler ``fn(payload) -> response``.

        ``validator(payload)`` raising rejects the request before anything is
        stored (at the caller when the handler is already registered, and again
        at delivery). Applied updates are history events, re-applied in order
        on replay, so the state handlers build is rebuilt deterministically.
        """

        def register(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
            self._update_handlers[name] = UpdateHandler(fn, validator)
            return fn

        return register

    def on_query(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a read-only query handler ``fn(*args)``, answered from any process."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._query_handlers[name] = fn
            return fn

        return register

    def _deliver_updates(self) -> int:
        """At a park point: apply pending requests in arrival order (owner only)."""
        return self._turn.drain_updates(self, stop=self._until)

    def wait_for_update(self, name: str, timeout: float | timedelta | None = None) -> Update:
        """The oldest pending update ``name`` that no handler takes; answer it with
        ``update.respond(value)``."""

        def poll(pending: list[Event], seq: int) -> Event | None:
            if name in self._update_handlers:
                return None  # a registered handler takes these (handlers, then waiters)
            # Arrival order: requests stored before the oldest ``name`` one are applied
            # first (the drain stops at it), so the waiter sees the state they built.
            self._deliver_updates()
            return self._turn.claim_update(name, self._buffer, self._next_seq())

        self._waiting_update = name
        try:
            final = self._wait(
                f"update:{name}",
                "update_wait",
                name,
                timeout,
                poll,
                {"kind": "update", "name": name},
            )
        finally:
            self._waiting_update = None
        if final.error is not None:
            raise WaitTimeoutError(f"No update {name!r} arrived within the timeout.")
        info = final.result or {}
        return Update(self, name, info.get("update_id", ""), info.get("payload"))

    def _respond(self, update: Update, value: Any) -> None:
        if update.update_id in self._responded:
            return
        if self._take("update_response", update.update_id) is not None:
            self._responded.add(update.update_id)
            return
        # Encode first: a response that is not JSON raises PayloadError and leaves
        # the request answerable by a corrected respond().
        encoded = encode(value, f"response to update {update.name!r}")
        self._responded.add(update.update_id)
        event = self._new("update_response", update.update_id, encoded)
        self._turn.respond_update(list(self._buffer), event)
        self._committed([*self._buffer, event])

    def wait_until(
        self, predicate: Callable[[], bool], timeout: float | timedelta | None = None
    ) -> bool:
        """Wait until ``predicate()`` is true, re-checked after each applied update.

        Returns False when the timeout passes first.
        """

        def poll(pending: list[Event], seq: int) -> Event | None:
            if not predicate():
                return None
            event = Event(seq, "until", "", True)
            self._turn.commit([*pending, event])
            return event

        self._until = predicate
        try:
            final = self._wait("until", "until", "", timeout, poll, {"kind": "until"})
        finally:
            self._until = None
        return final.error is None and bool(final.result)

    # -- children -----------------------------------------------------------------

    def start_child(
        self,
        workflow: Any,
        *args: Any,
        workflow_id: str | None = None,
        **kwargs: Any,
    ) -> ChildHandle:
        """Start a child run (committed with this run's history) and return its handle."""
        from .registry import resolve

        definition = resolve(workflow)
        recorded = self._take("child_start", definition.name)
        if recorded is not None:
            if recorded.error is not None:
                raise WorkflowAlreadyExistsError(recorded.result or "")
            return ChildHandle(recorded.result, self)
        child_id = workflow_id or f"{self.workflow_id}/child-{self._next_seq()}"
        event = self._new("child_start", definition.name, child_id)
        created = self._turn.start_child(
            list(self._buffer), event, definition, child_id, args, kwargs
        )
        self._committed([*self._buffer, event])
        if not created:
            raise WorkflowAlreadyExistsError(child_id)
        return ChildHandle(child_id, self)

    def _wait_child(self, child_id: str, timeout: float | timedelta | None) -> Any:
        final = self._wait(
            f"child:{child_id}",
            "child_result",
            child_id,
            timeout,
            lambda pending, seq: self._turn.child_outcome(child_id, pending, seq),
            {"kind": "child", "child_id": child_id},
        )
        if final.error is not None and final.error.get("timeout"):
            raise WaitTimeoutError(f"Child {child_id!r} did not finish within the timeout.")
        outcome = final.result or {}
        status = outcome.get("status")
        if status == "completed":
            return outcome.get("result")
        if status == "cancelled":
            raise WorkflowCancelledError(child_id)
        raise WorkflowFailedError(child_id, outcome.get("error") or {"type": status})
