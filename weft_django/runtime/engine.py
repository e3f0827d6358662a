"""The engine: claims runs and drives them, one turn at a time.

A :class:`WorkflowEngine` is one engine identity (one ``Engine`` row) with
its claim registry. ``drive(run_id)`` runs one turn of a run it holds:
replay the recorded history, execute until the run parks or ends, and
commit every write through the fenced-write helper. Hosts (the
``weft_worker`` command, Celery tasks, the test driver) decide *which* runs
to drive; this module decides *how*.
"""

from __future__ import annotations

import enum
import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError

from ..conf import MODE_LEASE, WeftSettings, get_settings
from ..exceptions import NonDeterminismError, PayloadError
from ..models import TERMINAL_STATUSES, EngineKind, RunStatus, WorkflowEvent, WorkflowRun
from ..ownership import metrics
from ..ownership.claims import ClaimRegistry
from ..ownership.clock import Clock, db_now
from ..ownership.engines import mark_disposing, mark_stopped, new_engine_id, register_engine
from ..ownership.gates import run_boot_gates
from ..ownership.global_lease import GlobalLeaseManager
from ..ownership.results import Acquired, ClaimResult, LostRace
from . import registry
from .context import Abandon, Context, Event, Park
from .payload import encode, error_info
from .turn import Turn

logger = logging.getLogger("weft_django.engine")

RUN_FIELDS = (
    "id",
    "workflow_name",
    "status",
    "args",
    "kwargs",
    "parent_id",
    "start_at",
    "timeout_at",
    "wake_hint_at",
)


class TurnOutcome(str, enum.Enum):
    COMPLETED = "completed"
    FAILED = "failed"
    PARKED = "parked"
    TIMED_OUT = "timed_out"
    SUSPENDED = "suspended"  # nondeterminism: blocked with the error shown
    DEPOSED = "deposed"
    ABANDONED = "abandoned"  # stopping, or a database error: the claim is kept
    NOT_HELD = "not_held"
    BUSY = "busy"
    MISSING = "missing"
    TERMINAL = "terminal"
    NOT_DUE = "not_due"
    NOT_ELIGIBLE = "not_eligible"


class WorkflowEngine:
    """One engine identity: gates, engine row, claims, and the turn driver."""

    def __init__(
        self,
        *,
        kind: str = EngineKind.WORKER,
        engine_id: str | None = None,
        settings: WeftSettings | None = None,
        using: str = "default",
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.mode = self.settings.ownership
        self.kind = kind
        self.using = using
        self.engine_id = engine_id or new_engine_id()
        self._clock = clock
        self.time_offset = timedelta(0)
        self.claims = ClaimRegistry(
            self.engine_id, settings=self.settings, using=using, clock=clock
        )
        self.global_lease = (
            GlobalLeaseManager(self.engine_id, self.settings, using=using, clock=clock)
            if self.mode == MODE_LEASE
            else None
        )
        self.stopping = threading.Event()
        self.started = False
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()

    # -- lifecycle --------------------------------------------------------------

    @property
    def claims_in_use(self) -> bool:
        """Modes ``workflow-lease`` and ``none`` track per-run claims."""
        return self.mode != MODE_LEASE

    def start(self) -> WorkflowEngine:
        """Run the boot gates, then insert this engine's row."""
        run_boot_gates(self.settings, using=self.using, engine_id=self.engine_id)
        register_engine(
            self.settings,
            kind=self.kind,
            engine_id=self.engine_id,
            using=self.using,
            now=self._clock() if self._clock else None,
        )
        self.started = True
        return self

    def dispose(self) -> None:
        """Stop taking claims; in-flight passes can no longer claim or drive."""
        self.stopping.set()
        self.claims.disposing = True
        if self.started:
            mark_disposing(self.engine_id, using=self.using)

    def shutdown(self) -> int:
        """Release every claim (epoch unchanged) and mark the engine stopped."""
        self.dispose()
        released = 0
        if self.started:
            released = self.claims.release_all() if self.claims_in_use else 0
            if self.global_lease is not None:
                self.global_lease.release()
            mark_stopped(self.engine_id, using=self.using)
        return released

    @property
    def clock_injected(self) -> bool:
        return self._clock is not None

    def now(self) -> datetime:
        """Time for timer and deadline judgments: the database clock (+ test offset)."""
        base = self._clock() if self._clock is not None else db_now(self.using)
        return base + self.time_offset

    # -- claims -----------------------------------------------------------------

    def fence_epoch(self, run_id: str) -> int | None:
        if self.mode == MODE_LEASE:
            return self.global_lease.epoch if self.global_lease else None
        return self.claims.epoch_of(run_id)

    def acquire(self, run_id: str) -> ClaimResult:
        """Claim ``run_id`` for this engine according to the ownership mode."""
        if self.stopping.is_set():
            return LostRace(run_id, None)
        if self.mode == MODE_LEASE:
            epoch = self.global_lease.epoch if self.global_lease else None
            return Acquired(run_id, epoch) if epoch is not None else LostRace(run_id, None)
        return self.claims.claim(run_id)

    def release(self, run_id: str) -> None:
        if self.claims_in_use:
            self.claims.release(run_id)

    # -- driving ----------------------------------------------------------------

    def _begin(self, run_id: str) -> bool:
        with self._lock:
            if run_id in self._in_flight:
                return False
            self._in_flight.add(run_id)
            return True

    def _end(self, run_id: str) -> None:
        with self._lock:
            self._in_flight.discard(run_id)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)

    def drive(self, run_id: str) -> TurnOutcome:
        """Run one turn of a run this engine holds."""
        if not self._begin(run_id):
            return TurnOutcome.BUSY
        try:
            outcome = self._drive(run_id)
        except DatabaseError:
            logger.exception("turn of %s: database error; the claim is kept", run_id)
            outcome = TurnOutcome.ABANDONED
        finally:
            self._end(run_id)
        metrics.turns.labels(outcome=outcome.value).inc()
        return outcome

    def _drive(self, run_id: str) -> TurnOutcome:
        epoch = self.fence_epoch(run_id)
        if epoch is None:
            return TurnOutcome.NOT_HELD
        run = WorkflowRun.objects.using(self.using).filter(pk=run_id).values(*RUN_FIELDS).first()
        if run is None:
            self.release(run_id)
            return TurnOutcome.MISSING
        if run["status"] in TERMINAL_STATUSES or run["status"] == RunStatus.SUSPENDED:
            self.release(run_id)
            return TurnOutcome.TERMINAL
        if not registry.is_registered(run["workflow_name"]):
            self.release(run_id)
            return TurnOutcome.NOT_ELIGIBLE
        definition = registry.get(run["workflow_name"])
        # The clock is read only for runs that have a start time or a timeout.
        now = self.now() if run["start_at"] or run["timeout_at"] else None
        if run["status"] == RunStatus.PENDING and run["start_at"] and run["start_at"] > now:
            return TurnOutcome.NOT_DUE
        turn = Turn(self, run, definition, epoch)
        try:
            if run["wake_hint_at"] is not None:
                # Clear the hint we saw before reading anything: a hint set after this
                # survives and triggers another turn, so no wake-up is ever lost.
                turn.clear_wake_hint(run["wake_hint_at"])
            if now is not None and run["timeout_at"] is not None and now >= run["timeout_at"]:
                turn.finish(
                    [],
                    RunStatus.TIMED_OUT,
                    error={"type": "TimedOut", "message": "execution timeout reached"},
                )
                return TurnOutcome.TIMED_OUT
            return self._execute(turn, run)
        except Abandon as abandoned:
            return self._abandoned(run_id, epoch, abandoned)

    def _load_events(self, run_id: str) -> list[Event]:
        rows = (
            WorkflowEvent.objects.using(self.using)
            .filter(run_id=run_id)
            .order_by("seq")
            .values_list("seq", "kind", "name", "result", "error")
        )
        return [Event(*row) for row in rows]

    def _execute(self, turn: Turn, run: dict[str, Any]) -> TurnOutcome:
        events = self._load_events(turn.run_id)
        ctx = Context(turn, events)
        for index, event in enumerate(events):
            if event.seq != index:
                ctx._poisoned = NonDeterminismError(
                    turn.run_id, index, f"event #{index}", f"event #{event.seq} (a gap)"
                )
                break
        try:
            if ctx._poisoned is not None:
                raise ctx._poisoned
            value = turn.definition.fn(ctx, *run["args"], **run["kwargs"])
        except Park as park:
            if ctx._poisoned is None:
                turn.park(ctx._take_buffer(), park.waiting_on, park.wake_at)
                return TurnOutcome.PARKED
            value, failure = None, ctx._poisoned
        except Abandon:
            raise
        except Exception as exc:
            value, failure = None, exc
        else:
            failure = None
        if ctx._poisoned is None:
            ctx._check_replayed_to_end(failure)
        if ctx._poisoned is not None:
            logger.error("%s", ctx._poisoned)
            turn.finish([], RunStatus.SUSPENDED, error=error_info(ctx._poisoned))
            return TurnOutcome.SUSPENDED
        if failure is None:
            try:
                result = encode(value, f"result of workflow {turn.run_id!r}")
            except PayloadError as exc:
                failure = exc
        if failure is not None:
            turn.finish(ctx._take_buffer(), RunStatus.FAILED, error=error_info(failure))
            return TurnOutcome.FAILED
        turn.finish(ctx._take_buffer(), RunStatus.COMPLETED, result=result)
        return TurnOutcome.COMPLETED

    def _abandoned(self, run_id: str, epoch: int, abandoned: Abandon) -> TurnOutcome:
        if abandoned.reason == "deposed":
            if self.claims.forget(run_id, epoch):
                metrics.claim_attempts.labels(outcome="deposed").inc()
            logger.warning("engine %s was deposed from %s; dropping it", self.engine_id, run_id)
            return TurnOutcome.DEPOSED
        if abandoned.reason == "database":
            logger.error(
                "turn of %s abandoned on a database error (claim kept, retried later): %s",
                run_id,
                abandoned.cause,
            )
        return TurnOutcome.ABANDONED

    def claim_and_drive(self, run_id: str) -> TurnOutcome | ClaimResult:
        """Claim the run (per the mode) and drive one turn; returns the claim result
        when the claim was not won."""
        result = self.acquire(run_id)
        if not isinstance(result, Acquired):
            return result
        if self.stopping.is_set():
            self.release(run_id)
            return TurnOutcome.ABANDONED
        return self.drive(run_id)
