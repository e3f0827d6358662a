"""The ``ctx`` a workflow receives: durable operations recorded and replayed.

Every durable operation takes the next sequence number. When history already
holds an event at that number, the operation returns the recorded outcome
(after checking that the event's kind and name match, else
:class:`NonDeterminismError`); otherwise it executes and records through the
turn's :class:`~.port.TurnPort`. Operations that cannot complete now park the
turn by raising :class:`~.port.Park`, a ``BaseException`` that user
``except Exception`` blocks cannot swallow. The bookkeeping (history,
position, buffer, handlers) is the turn's :class:`~.replay.Replay`.

Every operation first asks the turn whether its host has halted it
(:meth:`~.port.TurnPort.check_halt`: a worker whose shutdown grace is over),
so a turn stops at its next operation without recording anything more.

Waits are recorded as an optional ``wait`` marker (only when the operation
had to park; it stores the deadline) followed by the final event.
"""

from __future__ import annotations

import logging
import random as _random
import uuid as _uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime

from ..exceptions import (
    PayloadError,
    RetryAfter,
    StepFailedError,
    WaitTimeoutError,
    WorkflowAlreadyExistsError,
    WorkflowCancelledError,
    WorkflowFailedError,
)
from . import patches, retry_wait
from .backoff import is_transient
from .delivery import deliver_updates
from .handles import ChildHandle, ReplayAwareLogger, Update
from .payload import (
    CHILD_ID,
    EVENT_NAME,
    SIGNAL_NAME,
    UPDATE_NAME,
    check_id,
    encode,
    error_info,
    id_limit,
)
from .policy import RetryPolicy, as_seconds
from .port import Abandon, Event, Park, TurnPort
from .registry import resolve
from .replay import Replay, UpdateHandler

UPDATE_DRIVEN_WAITS = frozenset({"until", "update"})


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

    def __init__(self, turn: TurnPort, replay: Replay) -> None:
        self._turn = turn
        self._replay = replay
        self.workflow_id: str = turn.run_id
        self.workflow_name: str = turn.definition.name
        self.workflow_version: int = turn.definition.version
        self.parent_id: str | None = turn.parent_id or None
        self._responded: set[str] = set()

    # -- identity ---------------------------------------------------------------

    @property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger that stays quiet while the run replays recorded history."""
        return ReplayAwareLogger(self._replay, self.workflow_name)

    @property
    def is_replaying(self) -> bool:
        """True while the workflow re-executes operations its history already
        recorded; False from the first operation that runs live. For side effects
        outside steps that must not repeat (``ctx.logger`` already uses it)."""
        return self._replay.is_replaying

    @property
    def epoch(self) -> int:
        """The claim epoch this turn runs under; every fenced write of the turn is
        checked against it. 0 in a read-only replay (a query)."""
        return self._turn.epoch

    # -- recording ----------------------------------------------------------------

    def _record(self, event: Event) -> None:
        """Commit buffered events plus ``event`` in one fenced transaction."""
        events = [*self._replay.buffer, event]
        self._turn.commit(events)
        self._replay.committed(events)

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
        """Run ``fn`` once; its JSON result is checkpointed and replayed.

        ``name`` (default ``fn``'s ``module.qualname``) is an id (``InvalidIdError``)."""
        return self._step(fn, args, kwargs, name, retry, transactional, self._record)

    def _last_step(self, fn: Callable[..., Any], *args: Any, name: str, **kwargs: Any) -> Any:
        """A step after which the workflow ends its turn at once (returns, raises
        or sleeps; the Tasks backend's attempt): its event is not committed on its
        own but buffered, and goes out with the turn's last write (the finish or
        the park) in the same fenced statement. One commit per turn instead of
        two; nothing runs between the step and that write but the workflow's
        return, so a crash re-runs the step exactly when it would have (before
        its result is durable)."""
        return self._step(fn, args, kwargs, name, None, False, self._replay.buffer.append)

    def _step(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str | None,
        retry: RetryPolicy | None,
        transactional: bool,
        record: Callable[[Event], None],
    ) -> Any:
        self._turn.check_halt()
        step_name = check_id(name or _fn_name(fn), "step name", EVENT_NAME)
        attempt = retry_wait.replay_waits(self._replay, step_name, self._now, self._deliver_updates)
        recorded = self._replay.take("step", step_name)
        if recorded is not None:
            if recorded.error is not None:
                raise StepFailedError(
                    step_name,
                    recorded.error.get("type", "Error"),
                    recorded.error.get("message", ""),
                )
            return recorded.result
        policy = retry or RetryPolicy(max_attempts=1)
        while True:
            if attempt:
                self._turn.check_halt()  # a retry is a new attempt: not after the grace
            attempt += 1
            event = self._replay.new("step", step_name)
            try:
                if transactional:
                    value = self._turn.commit_transactional(
                        self._replay.pending(), event, fn, args, kwargs
                    )
                    self._replay.committed([*self._replay.buffer, event])
                    return value
                value = encode(fn(*args, **kwargs), f"result of step {step_name!r}")
            except (Park, Abandon):
                raise
            except Exception as exc:
                if is_transient(exc):
                    # The database connection or server failed under the step: not the
                    # step's failure. The turn is retried after a backoff (step included).
                    raise Abandon("database", exc) from exc
                if isinstance(exc, PayloadError) and exc.what == f"result of step {step_name!r}":
                    raise  # a non-JSON result: a programming error, never retried or recorded
                if attempt < policy.max_attempts and not isinstance(exc, policy.non_retryable):
                    if isinstance(exc, RetryAfter):  # a durable wait instead of the pause
                        raise retry_wait.wait(
                            self._replay,
                            step_name,
                            attempt,
                            exc.seconds,
                            self._now,
                            self._deliver_updates,
                        ) from None
                    self._turn.pause(policy.interval(attempt))
                    continue
                info = error_info(exc, with_traceback=False)
                info["attempts"] = attempt
                event.error = info
                record(event)
                raise StepFailedError(step_name, info["type"], info["message"]) from exc
            event.result = value
            record(event)
            return value

    # -- recorded values ----------------------------------------------------------

    def _recorded_value(self, kind: str, make: Callable[[], Any]) -> Any:
        self._turn.check_halt()
        recorded = self._replay.take(kind, "")
        if recorded is not None:
            return recorded.result
        value = make()
        self._replay.buffer.append(self._replay.new(kind, "", value))
        return value

    def now(self) -> datetime:
        """The current time, recorded: identical on replay."""
        value = self._recorded_value("now", lambda: _iso(self._now()))
        # Recorded by this method, so always an ISO datetime: _parse gives no None here.
        return _parse(value)  # type: ignore[return-value]

    def uuid4(self) -> _uuid.UUID:
        """A random UUID, recorded: identical on replay."""
        return _uuid.UUID(self._recorded_value("uuid4", lambda: str(_uuid.uuid4())))

    def random(self) -> float:
        """A float in [0, 1), recorded: identical on replay."""
        return float(self._recorded_value("random", _random.random))

    # -- patching ---------------------------------------------------------------

    def patched(self, change_id: str) -> bool:
        """Whether this run takes the new path of change ``change_id``: True on a
        run that reaches this point on code that has the change (a ``patch``
        marker is recorded), False on a run whose history went past this point
        without the marker (its old path replays). ``change_id`` is an id
        (``InvalidIdError``). See docs/deploying-code.md."""
        self._turn.check_halt()
        return patches.patched(self._replay, change_id)

    def deprecate_patch(self, change_id: str) -> None:
        """The change ``change_id`` once no run on its old path is left: replays
        on runs that have its marker and on runs that do not; records nothing."""
        self._turn.check_halt()
        patches.deprecate_patch(self._replay, change_id)

    # -- timers -----------------------------------------------------------------

    def sleep(self, duration: float | int | timedelta) -> None:
        """A durable timer: the run parks and wakes at the deadline, on any worker."""
        self._turn.check_halt()
        seconds = as_seconds(duration, "sleep duration") or 0.0
        recorded = self._replay.take("sleep", "")
        if recorded is not None:
            until = _parse(recorded.result["until"]) or self._now()
            if self._replay.peek() is not None:
                return  # later history exists: the timer fired in the original run
        else:
            until = self._now() + timedelta(seconds=max(seconds, 0.0))
            self._replay.buffer.append(self._replay.new("sleep", "", {"until": _iso(until)}))
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
        self._turn.check_halt()
        key = key[: id_limit(EVENT_NAME)]  # as stored: a long name replays against it
        seconds = as_seconds(timeout, "timeout")
        event = self._replay.peek()
        deadline: datetime | None = None
        marker: Event | None = None
        if event is not None and event.kind == final_kind and event.name == final_name:
            self._replay.advance()
            return event
        if event is not None and event.kind == "wait" and event.name == key:
            self._replay.advance()
            deadline = _parse((event.result or {}).get("deadline"))
            event = self._replay.peek()
            if event is not None:
                if event.kind == final_kind and event.name == final_name:
                    self._replay.advance()
                    return event
                raise self._replay.mismatch(f"{final_kind}({final_name!r})", event)
        elif event is not None:
            raise self._replay.mismatch(f"wait({key!r})", event)
        else:
            if seconds is not None:
                deadline = self._now() + timedelta(seconds=max(seconds, 0.0))
            marker = self._replay.new(
                "wait", key, {"deadline": _iso(deadline) if deadline else None}
            )
        # Live: try to complete now. The final event commits with the buffer; the
        # marker is needed only when the run parks (it carries the deadline).
        done = poll(self._replay.buffer, self._replay.next_seq)
        if done is None and self._deliver_updates() and waiting_on["kind"] in UPDATE_DRIVEN_WAITS:
            # Applied updates may have satisfied a predicate or brought the update
            # waited for; they cannot bring a signal or finish a child.
            done = poll(self._replay.buffer, self._replay.next_seq)
        if done is not None:
            self._replay.committed([*self._replay.buffer, done])
            return done
        if marker is not None:
            marker.seq = self._replay.next_seq
            self._replay.buffer.append(marker)
        if deadline is not None and self._now() >= deadline:
            timed_out = self._replay.new(final_kind, final_name, None, {"timeout": True})
            self._record(timed_out)
            return timed_out
        info = dict(waiting_on)
        info["deadline"] = _iso(deadline) if deadline else None
        raise Park(info, deadline)

    def wait_for_signal(self, name: str, timeout: float | timedelta | None = None) -> Any:
        """The oldest buffered, unconsumed signal ``name``, consumed exactly once."""
        check_id(name, "signal name", SIGNAL_NAME)
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
        check_id(name, "update name", UPDATE_NAME)

        def register(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
            self._replay.update_handlers[name] = UpdateHandler(fn, validator)
            return fn

        return register

    def on_query(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a read-only query handler ``fn(*args)``, answered from any process."""
        check_id(name, "query name", UPDATE_NAME)

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._replay.query_handlers[name] = fn
            return fn

        return register

    def _deliver_updates(self) -> int:
        """At a park point: apply pending requests in arrival order (owner only)."""
        return deliver_updates(self._replay, self._turn)

    def wait_for_update(self, name: str, timeout: float | timedelta | None = None) -> Update:
        """The oldest pending update ``name`` that no handler takes; answer it with
        ``update.respond(value)``."""
        check_id(name, "update name", UPDATE_NAME)

        def poll(pending: list[Event], seq: int) -> Event | None:
            if name in self._replay.update_handlers:
                return None  # a registered handler takes these (handlers, then waiters)
            # Arrival order: requests stored before the oldest ``name`` one are applied
            # first (the drain stops at it), so the waiter sees the state they built.
            self._deliver_updates()
            return self._turn.claim_update(name, self._replay.buffer, self._replay.next_seq)

        self._replay.waiting_update = name
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
            self._replay.waiting_update = None
        if final.error is not None:
            raise WaitTimeoutError(f"No update {name!r} arrived within the timeout.")
        info = final.result or {}
        return Update(self._respond, name, info.get("update_id", ""), info.get("payload"))

    def _respond(self, update: Update, value: Any) -> None:
        self._turn.check_halt()
        if update.update_id in self._responded:
            return
        if self._replay.take("update_response", update.update_id) is not None:
            self._responded.add(update.update_id)
            return
        # Encode first: a response that is not JSON raises PayloadError and leaves
        # the request answerable by a corrected respond().
        encoded = encode(value, f"response to update {update.name!r}")
        self._responded.add(update.update_id)
        event = self._replay.new("update_response", update.update_id, encoded)
        self._turn.respond_update(self._replay.pending(), event)
        self._replay.committed([*self._replay.buffer, event])

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

        self._replay.until = predicate
        try:
            final = self._wait("until", "until", "", timeout, poll, {"kind": "until"})
        finally:
            self._replay.until = None
        return final.error is None and bool(final.result)

    # -- children -----------------------------------------------------------------

    def start_child(
        self,
        workflow: Any,
        *args: Any,
        workflow_id: str | None = None,
        **kwargs: Any,
    ) -> ChildHandle:
        """Start a child run (committed with this run's history) and return its handle.

        Its id (``handle.id``) is ``workflow_id`` or ``"<this run's id>/child-<seq>"``,
        ``seq`` the position of its event in this run's history (docs/workflows.md).
        Arguments the child cannot take raise ``WorkflowArgumentsError``, nothing recorded.
        An id too long (also a derived one) or else invalid raises ``InvalidIdError``.
        """
        self._turn.check_halt()
        definition = resolve(workflow)
        definition.check_arguments(args, kwargs)  # on replay too: it never takes a seq
        # Before history is read, so a replay raises where the first execution did
        # (the next seq is ``pos`` on replay, as it was ``next_seq`` live).
        if workflow_id is not None:
            check_id(workflow_id, "child workflow_id", CHILD_ID)
        else:
            seq = self._replay.pos + len(self._replay.buffer)
            derived = "child workflow_id (derived from this run's id; pass a shorter one)"
            check_id(f"{self.workflow_id}/child-{seq}", derived, CHILD_ID)
        recorded = self._replay.take("child_start", definition.name)
        if recorded is not None:
            if recorded.error is not None:
                raise WorkflowAlreadyExistsError(recorded.result or "")
            return ChildHandle(recorded.result, self._wait_child)
        # Live, ``next_seq`` is the ``seq`` checked above: the id is checked already.
        child_id = workflow_id or f"{self.workflow_id}/child-{self._replay.next_seq}"
        event = self._replay.new("child_start", definition.name, child_id)
        created = self._turn.start_child(
            self._replay.pending(), event, definition, child_id, args, kwargs
        )
        self._replay.committed([*self._replay.buffer, event])
        if not created:
            raise WorkflowAlreadyExistsError(child_id)
        return ChildHandle(child_id, self._wait_child)

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
        raise WorkflowFailedError(
            child_id, outcome.get("error") or {"type": status}, status=str(status)
        )
