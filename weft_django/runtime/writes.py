"""The fenced writes of one run: every write a turn makes goes through here.

:class:`RunWrites` owns the fence (a :class:`~weft_django.ownership.Fence`
minted by the ownership strategy: this engine holds the run at its epoch),
the event inserts, the run row's status moves, parking and the terminal
commit (releasing the claim and waking the parent in the same transaction).
A lost fence or a database error becomes :class:`~.port.Abandon`, which user
code cannot swallow. :class:`~.turn.Turn` adds the writes a workflow's
``ctx`` asks for.

The write path of a checkpoint, a park, a terminal commit or a signal take
(:meth:`~.turn.Turn.take_signal`):

1. Here: does the strategy have this write in one statement? Its
   ``one_statement`` (a set of :class:`~weft_django.ownership.Form`, fixed
   per mode and database) says so, once; a checkpoint that marks the run
   running also needs the database clock (its statement stamps
   ``clock_timestamp()``).
2. Yes: the typed request (:class:`~weft_django.ownership.Checkpoint`,
   ``Park``, ``Finish``, ``TakeSignal``: the run's columns as fields, the
   events as rows with their JSON encoded once) goes to the strategy's
   ``insert_fenced`` / ``park_fenced`` / ``finish_fenced`` /
   ``take_signal_fenced`` with the fence (``ownership/modes/``), which picks
   the statement: on PostgreSQL the group commit for checkpoints and parks
   (``ownership/writes/group.py``), a statement of its own for the finish and
   the signal take (``writes/single.py``, ``writes/wake.py``); elsewhere the
   one-statement insert. They run on the hot cursor (``writes/cursor.py``).
   The answer is True (written, fence and all) or False (the fence did not
   hold: nothing was written, the turn is abandoned as ``deposed``); a signal
   take answers a ``SignalTake`` whose ``held`` is that answer. A
   ``DatabaseError`` abandons the turn as ``database``.
3. No: the same writes through the ORM inside ``ownership.fenced(fence)``, a
   transaction that proves the fence first (a locking read of the claim or
   the global lease; nothing in mode ``none``) and raises
   :class:`~weft_django.exceptions.EngineDeposedError` (``deposed``) when it
   does not hold.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from django.db import DatabaseError
from django.db.models import Case, DateTimeField, F, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..conf import WeftSettings
from ..exceptions import EngineDeposedError
from ..flow.slots import release_slots
from ..models import TERMINAL_STATUSES, RunStatus, WorkflowEvent, WorkflowRun
from ..ownership import Checkpoint, Fence, Finish, Form, Ownership, Park, Stamp, SteadyClock
from .payload import dumps
from .port import Abandon, Event
from .prefetch import CLOCK_READ
from .runs import close_run, ending_fields
from .wakeups import notify

R = TypeVar("R")  # a write's request
A = TypeVar("A")  # its answer


class TurnHost(Protocol):
    """What a turn needs from the engine that drives it."""

    engine_id: str
    using: str
    settings: WeftSettings
    ownership: Ownership
    stopping: threading.Event
    halted: threading.Event

    def now(self) -> datetime:
        """The time for timer and deadline judgments."""

    def db_stamp(self) -> str | None:
        """SQL for "now" when the engine runs on the database clock; else None."""


class RunWrites:
    """The fenced writes of one run, at ``epoch``, for the engine ``host``."""

    def __init__(
        self,
        host: TurnHost,
        run: dict[str, Any],
        epoch: int,
        *,
        holds_slots: bool = False,
    ) -> None:
        self.host = host
        self.ownership = host.ownership
        self.using = host.using
        self.run_id: str = run["id"]
        self.parent_id: str = run.get("parent_id") or ""
        self.status: str = run["status"]
        self.timeout_at: datetime | None = run.get("timeout_at")
        self.epoch = epoch
        #: This engine's fencing token for the run: every write proves it.
        self.fence = host.ownership.fence_for(self.run_id, epoch)
        #: The wake hint this turn answers (read with the run): cleared by its park.
        self.hint_seen: datetime | None = run.get("wake_hint_at")
        #: The turn holds flow-control slots (it was admitted by the gate): its
        #: park or finish frees them in the same write; otherwise the engine does.
        self.holds_slots = holds_slots
        #: The database clock, read once per turn (or with the prefetched row).
        self._clock = SteadyClock(host.now, math.inf, seed=run.get(CLOCK_READ))

    # -- plumbing ---------------------------------------------------------------

    def now(self) -> datetime:
        """The database clock, read once per turn (or with the run's prefetched
        row): later calls add the time elapsed since on a monotonic clock, so a
        turn's deadline and timer judgments cost no further round trips. An
        injected clock or a test time offset (no ``db_stamp``) is read every time."""
        if self.host.db_stamp() is None:
            return self.host.now()
        return self._clock()

    @contextmanager
    def _fenced(self) -> Iterator[None]:
        try:
            with self.ownership.fenced(self.fence):
                yield
        except EngineDeposedError as exc:
            raise Abandon("deposed", exc) from exc
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
                    engine_id=self.host.engine_id,
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

    def _event_rows(self, events: list[Event]) -> list[tuple[Any, ...]]:
        """Events as rows of :data:`~weft_django.ownership.writes.requests.EVENT_COLUMNS`."""
        now = timezone.now()  # created_at is bookkeeping, never judged
        return [
            (
                self.run_id,
                event.seq,
                event.kind,
                event.name[:255],
                None if event.result is None else dumps(event.result),
                None if event.error is None else dumps(event.error),
                self.host.engine_id,
                self.epoch,
                now,
            )
            for event in events
        ]

    def _stamp(self) -> Stamp:
        """The time a one-statement write stamps the run with."""
        return Stamp(self.host.db_stamp(), self.now)

    def _statement(self, write: Callable[[Fence, R], A], request: R) -> A:
        """Run a one-statement fenced write the strategy has, with this run's
        fence: its answer. A database error abandons the turn."""
        try:
            return write(self.fence, request)
        except DatabaseError as exc:
            raise Abandon("database", exc) from exc

    def _one_statement(self, write: Callable[[Fence, R], bool], request: R) -> None:
        """The same, for a write that answers True (written) or False: the fence
        did not hold, nothing was written, and the turn is abandoned as deposed."""
        if not self._statement(write, request):
            raise self._deposed()

    def _deposed(self) -> Abandon:
        return Abandon("deposed", EngineDeposedError(self.run_id))

    def commit(self, events: list[Event]) -> None:
        if events and self._commit_in_one_statement(events):
            return
        with self._fenced():
            self._insert(events)
            self._mark_running()

    def _commit_in_one_statement(self, events: list[Event]) -> bool:
        """The hot path of a step checkpoint: fence and insert in one round trip.
        False: not written this way (no such form here)."""
        mark_running = self.status != RunStatus.RUNNING
        if mark_running and self.host.db_stamp() is None:
            return False  # its statement stamps the database's clock
        form = Form.CHECKPOINT_RUNNING if mark_running else Form.CHECKPOINT
        if form not in self.ownership.one_statement:
            return False
        wake_at = self.timeout_at if mark_running else None
        checkpoint = Checkpoint(self._event_rows(events), mark_running, wake_at)
        self._one_statement(self.ownership.insert_fenced, checkpoint)
        self.status = RunStatus.RUNNING
        return True

    # -- how the turn ends ------------------------------------------------------------

    def park(
        self, events: list[Event], waiting_on: dict[str, Any], wake_at: datetime | None
    ) -> None:
        if self.timeout_at is not None and (wake_at is None or self.timeout_at < wake_at):
            wake_at = self.timeout_at
        if Form.PARK in self.ownership.one_statement:
            park = Park(
                self._event_rows(events),
                waiting_on_json=dumps(waiting_on),
                wake_at=wake_at,
                hint_seen=self.hint_seen,
                stamp=self._stamp(),
                free_slots=self.holds_slots,
            )
            self._one_statement(self.ownership.park_fenced, park)
            self._parked()
            return
        now = self.now()
        hint: dict[str, Any] = {}
        if self.hint_seen is not None:  # cleared only if still the one this turn read
            hint["wake_hint_at"] = Case(
                When(wake_hint_at=self.hint_seen, then=Value(None)),
                default=F("wake_hint_at"),
                output_field=DateTimeField(),
            )
        with self._fenced():
            self._insert(events)
            WorkflowRun.objects.using(self.using).filter(pk=self.run_id).update(
                status=RunStatus.WAITING,
                waiting_on=waiting_on,
                wake_at=wake_at,
                updated_at=now,
                started_at=Coalesce(F("started_at"), now),
                **hint,
            )
            self._free_slots()
        self._parked()

    def _parked(self) -> None:
        self.status = RunStatus.WAITING
        self.hint_seen = None
        self.holds_slots = False

    def _free_slots(self) -> None:
        """Inside the turn's last fenced transaction: free its slots there too."""
        if self.holds_slots:
            release_slots(self.using, self.run_id, self.host.engine_id, self.epoch)

    def finish(
        self,
        events: list[Event],
        status: str,
        *,
        result: Any = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        """Commit a terminal (or suspended) state; release the claim in the same txn."""
        if status in TERMINAL_STATUSES and Form.FINISH in self.ownership.one_statement:
            self._finish_in_one_statement(events, status, result, error)
            if self.parent_id:  # the statement left the parent's wake hint
                notify(self.parent_id, using=self.using)
            self._finished(status)
            return
        now = self.now()
        with self._fenced():
            self._insert(events)
            WorkflowRun.objects.using(self.using).filter(pk=self.run_id).update(
                **ending_fields(status, now, result=result, error=error),
                started_at=Coalesce(F("started_at"), now),
            )
            close_run(self.run_id, status, now=now, parent_id=self.parent_id, using=self.using)
            self.ownership.release_in_commit(self.fence)
            self._free_slots()
        self._finished(status)

    def _finish_in_one_statement(
        self, events: list[Event], status: str, result: Any, error: dict[str, Any] | None
    ) -> None:
        """The terminal commit as one statement (the strategy has one)."""
        finish = Finish(
            self._event_rows(events),
            status=status,
            result_json=None if result is None else dumps(result),
            error_json=None if error is None else dumps(error),
            parent_id=self.parent_id,
            response_ttl=self.host.settings.update_response_ttl,
            stamp=self._stamp(),
            free_slots=self.holds_slots,
        )
        self._one_statement(self.ownership.finish_fenced, finish)

    def _finished(self, status: str) -> None:
        self.ownership.forget(self.run_id)
        self.status = status
        self.holds_slots = False
