"""One turn of one run: the writes a workflow's ``ctx`` asks for.

A :class:`Turn` is the database side of a :class:`~.context.Context` (it
implements :class:`~.port.TurnPort`): on top of :class:`~.writes.RunWrites`
(the fence, checkpoints, parking, the terminal commit) it runs transactional
steps, consumes signals, starts children and answers update requests, each
as one fenced write.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..models import (
    TERMINAL_STATUSES,
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowRun,
    WorkflowSignal,
)
from ..ownership import Form, TakeSignal
from .backoff import is_transient
from .payload import check_decoded, encode, encode_call
from .port import HALTED, Abandon, Event, PendingUpdate
from .prefetch import SIGNALS_BUFFERED, UPDATES_PENDING
from .registry import WorkflowDefinition
from .runs import is_duplicate_key, new_run
from .wakeups import notify
from .writes import RunWrites, TurnHost


class _UserError(Exception):
    """Carries an exception raised by user code out of a rolled-back transaction."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class Turn(RunWrites):
    """The writes of one turn of a run of ``definition``, at ``epoch``."""

    read_only = False

    def __init__(
        self,
        host: TurnHost,
        run: dict[str, Any],
        definition: WorkflowDefinition,
        epoch: int,
        *,
        holds_slots: bool = False,
    ) -> None:
        super().__init__(host, run, epoch, holds_slots=holds_slots)
        self.definition = definition
        # What a prefetched first-turn read saw (None: not read). Nothing there
        # then means no read now: anything stored since left a wake hint.
        self._no_signals = run.get(SIGNALS_BUFFERED) is False
        self._no_updates = run.get(UPDATES_PENDING) is False

    def check_halt(self) -> None:
        """Stop here once the host's shutdown grace is over (see :class:`~.port.TurnPort`)."""
        if self.host.halted.is_set():
            raise Abandon(HALTED)

    def pause(self, seconds: float) -> None:
        """Wait between step retries; a stopping engine abandons the turn instead."""
        if seconds > 0 and self.host.stopping.wait(seconds):
            raise Abandon("stopping")

    def commit_transactional(
        self,
        pending: list[Event],
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
                    if is_transient(exc):  # the connection or the server failed, not the step
                        raise Abandon("database", exc) from exc
                    raise _UserError(exc) from exc
                # Re-check ownership after user code ran, right before the checkpoint.
                with self._fenced():
                    event.result = value
                    self._insert([*pending, event])
                    self._mark_running()
        except _UserError as wrapped:
            raise wrapped.original from None
        return value

    def consume_signal(self, name: str, pending: list[Event], seq: int) -> Event | None:
        # Nothing buffered: one plain read, no fenced transaction (a wait that
        # parks is most waits). A signal stored after this read leaves its wake
        # hint on the run, which parking keeps, so the run is woken for it. The
        # same holds for a prefetched read that saw none (no read here then).
        if self._no_signals:
            return None
        signals = WorkflowSignal.objects.using(self.using)
        buffered = signals.filter(run_id=self.run_id, name=name, consumed_at__isnull=True)
        if not buffered.exists():
            return None
        event = self._take_signal_in_one_statement(name, pending, seq)
        if event is not None:
            return event
        for _attempt in range(5):
            with self._fenced():
                row = buffered.order_by("id").values_list("id", "payload").first()
                if row is None:
                    return None
                signal_pk, payload = row
                check_decoded(payload, f"payload of signal {name!r}")  # before it is consumed
                taken = signals.filter(pk=signal_pk, consumed_at__isnull=True).update(
                    consumed_at=self.now(), consumed_seq=seq
                )
                if taken == 1:
                    event = Event(seq, "signal", name, payload)
                    self._insert([*pending, event])
                    self._mark_running()
                    return event
        return None

    def _take_signal_in_one_statement(
        self, name: str, pending: list[Event], seq: int
    ) -> Event | None:
        """The woken turn's consume as one fenced statement, where the strategy
        has one; None: not taken that way (no such form, or a concurrent consumer:
        the transactional loop looks again)."""
        if Form.TAKE_SIGNAL not in self.ownership.one_statement:
            return None
        mark_running = self.status != RunStatus.RUNNING
        request = TakeSignal(
            name,
            seq,
            self._event_rows(pending),
            created_at=timezone.now(),
            mark_running=mark_running,
            wake_at=self.timeout_at if mark_running else None,
            stamp=self._stamp(),
        )
        taken = self._statement(self.ownership.take_signal_fenced, request)
        if not taken.held:
            raise self._deposed()
        if not taken.taken:
            return None
        self.status = RunStatus.RUNNING
        payload = check_decoded(taken.payload, f"payload of signal {name!r}")
        return Event(seq, "signal", name, payload)

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
            outcome = {
                "status": row[0],
                "result": check_decoded(row[1], f"result of child {child_id!r}"),
                "error": check_decoded(row[2], f"error of child {child_id!r}"),
            }
        else:
            return None
        event = Event(seq, "child_result", child_id, outcome)
        self.commit([*pending, event])
        return event

    def start_child(
        self,
        pending: list[Event],
        event: Event,
        definition: WorkflowDefinition,
        child_id: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> bool:
        """Create the child run with this run's event; False when the id was taken."""
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
            except IntegrityError as exc:
                if not is_duplicate_key(exc):
                    raise
                exists = True
                event.error = {"type": "WorkflowAlreadyExistsError", "message": child_id}
            self._insert([*pending, event])
            self._mark_running()
        if exists:
            return False
        notify(child_id, using=self.using)
        return True

    # -- updates ----------------------------------------------------------------------

    def _answer(self, pk: int, status: str, **values: Any) -> int:
        """Answer pending request ``pk`` (0: it was answered concurrently)."""
        now = self.now()
        return (
            UpdateRequest.objects.using(self.using)
            .filter(pk=pk, status=UpdateStatus.PENDING)
            .update(
                status=status,
                responded_at=now,
                expires_at=now + timedelta(seconds=self.host.settings.update_response_ttl),
                **values,
            )
        )

    def pending_updates(self) -> list[PendingUpdate]:
        if self._no_updates:
            return []  # as read with the run; a request stored since left a wake hint
        rows = (
            UpdateRequest.objects.using(self.using)
            .filter(run_id=self.run_id, status=UpdateStatus.PENDING)
            .order_by("id")
            .values_list("pk", "update_id", "name", "payload")
        )
        return [PendingUpdate(*row) for row in rows]

    def reject_update(self, pk: int, kind: str, message: str) -> None:
        with self._fenced():
            self._answer(pk, UpdateStatus.REJECTED, error={"type": kind, "message": message[:4000]})

    def apply_update(self, pk: int, pending: list[Event], event: Event) -> None:
        """The request's answer and its ``update`` event commit together, only if
        the request is still pending (a racing drain makes this turn give up)."""
        with self._fenced():
            taken = self._answer(
                pk,
                UpdateStatus.FAILED if event.error else UpdateStatus.APPLIED,
                response=(event.result or {}).get("response"),
                error=event.error,
                applied_seq=event.seq,
            )
            if taken != 1:
                raise Abandon("update applied concurrently")
            self._insert([*pending, event])
            self._mark_running()

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
                    info = {"update_id": update_id, "payload": payload}
                    event = Event(seq, "update_wait", name, info)
                    self._insert([*pending, event])
                    self._mark_running()
                    return event
        return None

    def respond_update(self, pending: list[Event], event: Event) -> None:
        """Record ``update.respond(value)`` and answer the caller, in one fenced write."""
        now = self.now()
        with self._fenced():
            UpdateRequest.objects.using(self.using).filter(
                run_id=self.run_id, update_id=event.name, status=UpdateStatus.DELIVERED
            ).update(
                status=UpdateStatus.APPLIED,
                response=event.result,
                responded_at=now,
                expires_at=now + timedelta(seconds=self.host.settings.update_response_ttl),
            )
            self._insert([*pending, event])
            self._mark_running()
