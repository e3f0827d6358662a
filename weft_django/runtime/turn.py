"""One turn of one run: every write it makes, each through the fenced-write helper.

A :class:`Turn` is the database side of a :class:`~.context.Context`: it
commits recorded events, consumes signals, starts children, parks the run
and commits its terminal state (releasing the claim and waking the parent
in the same transaction). A lost fence or a database error becomes
:class:`~.context.Abandon`, which user code cannot swallow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..conf import MODE_WORKFLOW_LEASE
from ..exceptions import EngineDeposedError
from ..messages import close_open_requests
from ..models import (
    TERMINAL_STATUSES,
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from ..notify import notify
from ..ownership.claims import release_statement
from ..ownership.fence import fenced, fenced_finish, fenced_insert
from .context import Abandon, Context, Event
from .payload import dumps, encode, encode_call, error_info
from .registry import WorkflowDefinition

if TYPE_CHECKING:
    from .engine import WorkflowEngine


class _UserError(Exception):
    """Carries an exception raised by user code out of a rolled-back transaction."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class Turn:
    read_only = False

    def __init__(
        self,
        engine: WorkflowEngine,
        run: dict[str, Any],
        definition: WorkflowDefinition,
        epoch: int,
    ) -> None:
        self.engine = engine
        self.using = engine.using
        self.run_id: str = run["id"]
        self.parent_id: str = run.get("parent_id") or ""
        self.status: str = run["status"]
        self.timeout_at: datetime | None = run.get("timeout_at")
        self.definition = definition
        self.epoch = epoch

    # -- plumbing ---------------------------------------------------------------

    def now(self) -> datetime:
        return self.engine.now()

    def now_local(self) -> datetime:
        """A bookkeeping timestamp (``created_at``): never used for judgments."""
        return timezone.now()

    def pause(self, seconds: float) -> None:
        """Wait between step retries; a stopping engine abandons the turn instead."""
        if seconds > 0 and self.engine.stopping.wait(seconds):
            raise Abandon("stopping")

    @contextmanager
    def _fenced(self) -> Iterator[None]:
        try:
            with fenced(
                self.run_id,
                engine_id=self.engine.engine_id,
                epoch=self.epoch,
                mode=self.engine.mode,
                using=self.using,
            ):
                yield
        except EngineDeposedError as exc:
            raise Abandon("deposed", exc) from exc
        except _UserError:
            raise
        except DatabaseError as exc:
            raise Abandon("database", exc) from exc

    def _insert(self, events: list[Event]) -> None:
        if not events:
            return
        WorkflowEvent.objects.using(self.using).bulk_create(
            [
                WorkflowEvent(
                    run_id=self.run_id,
                    seq=event.seq,
                    kind=event.kind,
                    name=event.name[:255],
                    result=event.result,
                    error=event.error,
                    engine_id=self.engine.engine_id,
                    epoch=self.epoch,
                )
                for event in events
            ]
        )

    def _mark_running(self) -> None:
        """The first write of a turn moves a pending/waiting run to running."""
        if self.status == RunStatus.RUNNING:
            return
        now = self.now()
        WorkflowRun.objects.using(self.using).filter(pk=self.run_id).update(
            status=RunStatus.RUNNING,
            started_at=Coalesce(F("started_at"), now),
            updated_at=now,
            waiting_on=None,
            wake_at=self.timeout_at,
        )
        self.status = RunStatus.RUNNING

    def clear_wake_hint(self, seen: datetime) -> None:
        """Clear the wake hint this turn answers (fenced: a deposed engine must not
        swallow the new owner's wake-up). A hint set after ``seen`` survives."""
        with self._fenced():
            WorkflowRun.objects.using(self.using).filter(
                pk=self.run_id, wake_hint_at=seen
            ).update(wake_hint_at=None)

    # -- writes the context asks for ------------------------------------------------

    def commit(self, events: list[Event]) -> None:
        if events and self._commit_in_one_statement(events):
            return
        with self._fenced():
            self._insert(events)
            self._mark_running()

    def _commit_in_one_statement(self, events: list[Event]) -> bool:
        """The hot path of a step checkpoint: fence and insert in one round trip.

        Only for mode ``workflow-lease`` on a backend that has the statement;
        False means "use the transaction" (nothing was written).
        """
        if self.engine.mode != MODE_WORKFLOW_LEASE:
            return False
        mark_running = None
        if self.status != RunStatus.RUNNING:
            if self._db_stamp() is None:
                return False
            mark_running = (self._db_stamp(), self.timeout_at)
        rows = self._event_rows(events)
        try:
            inserted = fenced_insert(
                self.using,
                workflow_id=self.run_id,
                engine_id=self.engine.engine_id,
                epoch=self.epoch,
                rows=rows,
                mark_running=mark_running,
            )
        except DatabaseError as exc:
            raise Abandon("database", exc) from exc
        if inserted is None:
            return False
        if not inserted:
            raise Abandon("deposed", EngineDeposedError(self.run_id))
        self.status = RunStatus.RUNNING
        return True

    def _db_stamp(self) -> str | None:
        """SQL for "now" when the engine runs on the database clock itself (no
        injected clock, no test time offset); None otherwise."""
        if self.engine.clock_injected or self.engine.time_offset:
            return None
        return "clock_timestamp()"

    def _event_rows(self, events: list[Event]) -> list[tuple[Any, ...]]:
        now = self.now_local()
        return [
            (
                self.run_id,
                event.seq,
                event.kind,
                event.name[:255],
                None if event.result is None else dumps(event.result),
                None if event.error is None else dumps(event.error),
                self.engine.engine_id,
                self.epoch,
                now,
            )
            for event in events
        ]

    def _finish_in_one_statement(
        self, events: list[Event], status: str, result: Any, error: dict[str, Any] | None
    ) -> bool:
        """The terminal commit as one statement (PostgreSQL, mode workflow-lease)."""
        if self.engine.mode != MODE_WORKFLOW_LEASE or status not in TERMINAL_STATUSES:
            return False
        stamp = self._db_stamp()
        stamp_params: list[Any] = []
        if stamp is None:
            stamp, stamp_params = "%s", [self.now()]
        try:
            released = fenced_finish(
                self.using,
                workflow_id=self.run_id,
                engine_id=self.engine.engine_id,
                epoch=self.epoch,
                rows=self._event_rows(events),
                status=status,
                result_json=None if result is None else dumps(result),
                error_json=None if error is None else dumps(error),
                parent_id=self.parent_id,
                stamp=stamp,
                stamp_params=stamp_params,
                response_ttl=self.engine.settings.update_response_ttl,
            )
        except DatabaseError as exc:
            raise Abandon("database", exc) from exc
        if released is None:
            return False
        if not released:
            raise Abandon("deposed", EngineDeposedError(self.run_id))
        return True

    def commit_transactional(
        self,
        buffered: list[Event],
        event: Event,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run ``fn`` inside the fenced checkpoint transaction; both commit or neither."""
        try:
            with self._fenced():
                try:
                    with transaction.atomic(using=self.using):
                        value = encode(fn(*args, **kwargs), f"result of step {event.name!r}")
                except Exception as exc:
                    raise _UserError(exc) from exc
                # Re-check ownership after user code ran, right before the checkpoint.
                with self._fenced():
                    event.result = value
                    self._insert([*buffered, event])
                    self._mark_running()
        except _UserError as wrapped:
            raise wrapped.original from None
        return value

    def consume_signal(self, name: str, pending: list[Event], seq: int) -> Event | None:
        signals = WorkflowSignal.objects.using(self.using)
        for _attempt in range(5):
            with self._fenced():
                row = (
                    signals.filter(run_id=self.run_id, name=name, consumed_at__isnull=True)
                    .order_by("id")
                    .values_list("id", "payload")
                    .first()
                )
                if row is None:
                    return None
                signal_pk, payload = row
                taken = signals.filter(pk=signal_pk, consumed_at__isnull=True).update(
                    consumed_at=self.now(), consumed_seq=seq
                )
                if taken == 1:
                    event = Event(seq, "signal", name, payload)
                    self._insert([*pending, event])
                    self._mark_running()
                    return event
        return None

    def child_outcome(self, child_id: str, pending: list[Event], seq: int) -> Event | None:
        row = (
            WorkflowRun.objects.using(self.using)
            .filter(pk=child_id)
            .values_list("status", "result", "error")
            .first()
        )
        if row is None:
            outcome: dict[str, Any] = {
                "status": "failed",
                "error": {"type": "WorkflowNotFoundError", "message": f"{child_id} was purged"},
            }
        elif row[0] in TERMINAL_STATUSES:
            outcome = {"status": row[0], "result": row[1], "error": row[2]}
        else:
            return None
        event = Event(seq, "child_result", child_id, outcome)
        self.commit([*pending, event])
        return event

    def start_child(
        self,
        buffered: list[Event],
        event: Event,
        definition: WorkflowDefinition,
        child_id: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> bool:
        """Create the child run with this run's event; False when the id was taken."""
        from ..api import new_run

        encoded_args, encoded_kwargs = encode_call(args, kwargs, f"child {child_id!r}")
        exists = False
        with self._fenced():
            try:
                with transaction.atomic(using=self.using):
                    new_run(
                        definition,
                        child_id,
                        encoded_args,
                        encoded_kwargs,
                        parent_id=self.run_id,
                        now=self.now(),
                        using=self.using,
                    )
            except IntegrityError:
                exists = True
                event.error = {"type": "WorkflowAlreadyExistsError", "message": child_id}
            self._insert([*buffered, event])
            self._mark_running()
        if exists:
            return False
        notify(child_id, using=self.using)
        return True

    # -- updates ----------------------------------------------------------------------

    def _response_fields(self, status: str, **values: Any) -> dict[str, Any]:
        now = self.now()
        return {
            "status": status,
            "responded_at": now,
            "expires_at": now + timedelta(seconds=self.engine.settings.update_response_ttl),
            **values,
        }

    def drain_updates(self, ctx: Context, stop: Callable[[], bool] | None = None) -> int:
        """Apply this run's pending update requests in arrival order; returns how many.

        Each applied request is one fenced write: the request's answer and the
        ``update`` history event commit together, conditional on the request
        still being pending (a racing drain makes this turn give up). The drain
        stops at the first request for the ``wait_for_update`` in progress (the
        waiter takes it; later ones wait for the next park point), and after
        the first applied request that makes ``stop()`` true (``wait_until``).
        """
        requests = UpdateRequest.objects.using(self.using)
        pending_rows = list(
            requests.filter(run_id=self.run_id, status=UpdateStatus.PENDING)
            .order_by("id")
            .values_list("pk", "update_id", "name", "payload")
        )
        applied = 0
        for pk, update_id, name, payload in pending_rows:
            handler = ctx._update_handlers.get(name)
            if handler is None:
                if name == ctx._waiting_update:
                    break  # the wait_for_update in progress takes it, in order
                self._reject_update(
                    pk,
                    "UnknownUpdate",
                    f"run {self.run_id!r} has no handler for update {name!r} and is not "
                    "waiting for it",
                )
                continue
            if handler.validator is not None:
                try:
                    with ctx.in_handler("update"):
                        handler.validator(payload)
                except Exception as exc:
                    self._reject_update(pk, type(exc).__name__, str(exc))
                    continue
            response: Any = None
            error: dict[str, Any] | None = None
            try:
                with ctx.in_handler("update"):
                    raw = handler.fn(payload)
                response = encode(raw, f"response to update {name!r}")
            except Exception as exc:
                error = error_info(exc, with_traceback=False)
            event = Event(
                ctx._next_seq(),
                "update",
                name,
                {"update_id": update_id, "payload": payload, "response": response},
                error,
            )
            pending = list(ctx._buffer)
            with self._fenced():
                taken = requests.filter(pk=pk, status=UpdateStatus.PENDING).update(
                    **self._response_fields(
                        UpdateStatus.FAILED if error else UpdateStatus.APPLIED,
                        response=response,
                        error=error,
                        applied_seq=event.seq,
                    )
                )
                if taken != 1:
                    raise Abandon("update applied concurrently")
                self._insert([*pending, event])
                self._mark_running()
            ctx._committed([*pending, event])
            applied += 1
            if stop is not None and stop():
                break
        return applied

    def _reject_update(self, pk: int, kind: str, message: str) -> None:
        with self._fenced():
            UpdateRequest.objects.using(self.using).filter(
                pk=pk, status=UpdateStatus.PENDING
            ).update(
                **self._response_fields(
                    UpdateStatus.REJECTED, error={"type": kind, "message": message[:4000]}
                )
            )

    def claim_update(self, name: str, pending: list[Event], seq: int) -> Event | None:
        """Hand the oldest pending request ``name`` to ``wait_for_update``."""
        requests = UpdateRequest.objects.using(self.using)
        for _attempt in range(5):
            with self._fenced():
                row = (
                    requests.filter(run_id=self.run_id, name=name, status=UpdateStatus.PENDING)
                    .order_by("id")
                    .values_list("pk", "update_id", "payload")
                    .first()
                )
                if row is None:
                    return None
                pk, update_id, payload = row
                taken = requests.filter(pk=pk, status=UpdateStatus.PENDING).update(
                    status=UpdateStatus.DELIVERED, applied_seq=seq
                )
                if taken == 1:
                    event = Event(
                        seq, "update_wait", name, {"update_id": update_id, "payload": payload}
                    )
                    self._insert([*pending, event])
                    self._mark_running()
                    return event
        return None

    def respond_update(self, pending: list[Event], event: Event) -> None:
        """Record ``update.respond(value)`` and answer the caller, in one fenced write."""
        with self._fenced():
            UpdateRequest.objects.using(self.using).filter(
                run_id=self.run_id, update_id=event.name, status=UpdateStatus.DELIVERED
            ).update(**self._response_fields(UpdateStatus.APPLIED, response=event.result))
            self._insert([*pending, event])
            self._mark_running()

    # -- how the turn ends ------------------------------------------------------------

    def park(
        self, events: list[Event], waiting_on: dict[str, Any], wake_at: datetime | None
    ) -> None:
        if self.timeout_at is not None and (wake_at is None or self.timeout_at < wake_at):
            wake_at = self.timeout_at
        with self._fenced():
            self._insert(events)
            WorkflowRun.objects.using(self.using).filter(pk=self.run_id).update(
                status=RunStatus.WAITING,
                waiting_on=waiting_on,
                wake_at=wake_at,
                updated_at=self.now(),
                started_at=Coalesce(F("started_at"), self.now()),
            )
        self.status = RunStatus.WAITING

    def finish(
        self,
        events: list[Event],
        status: str,
        *,
        result: Any = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        """Commit a terminal (or suspended) state; release the claim in the same txn."""
        if self._finish_in_one_statement(events, status, result, error):
            self._finished(status)
            return
        now = self.now()
        with self._fenced():
            self._insert(events)
            WorkflowRun.objects.using(self.using).filter(pk=self.run_id).update(
                status=status,
                result=result,
                error=error,
                waiting_on=None,
                wake_at=None,
                wake_hint_at=None,
                updated_at=now,
                started_at=Coalesce(F("started_at"), now),
                finished_at=None if status == RunStatus.SUSPENDED else now,
            )
            if status in TERMINAL_STATUSES:
                close_open_requests(self.run_id, status, now=now, using=self.using)
            if self.engine.mode == MODE_WORKFLOW_LEASE or self.engine.claims_in_use:
                release_statement(self.using, self.run_id, self.engine.engine_id, self.epoch)
            if self.parent_id and status != RunStatus.SUSPENDED:
                WorkflowRun.objects.using(self.using).filter(pk=self.parent_id).update(
                    wake_hint_at=now
                )
        self._finished(status)

    def _finished(self, status: str) -> None:
        self.engine.claims.forget(self.run_id)
        self.status = status
        if self.parent_id and status != RunStatus.SUSPENDED:
            notify(self.parent_id, using=self.using)
