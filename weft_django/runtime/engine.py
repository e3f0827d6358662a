"""The engine: claims runs and drives them, one turn at a time.

A :class:`WorkflowEngine` is one engine identity (one ``Engine`` row) with
the ownership strategy of the configured mode. ``drive(run_id)`` runs one turn of a run it holds:
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

from django.db import DatabaseError, connections

from ..conf import WeftSettings, get_settings
from ..exceptions import PayloadError
from ..flow import gate as flow
from ..flow.settings import QueueLimits
from ..models import TERMINAL_STATUSES, EngineKind, RunStatus, WorkflowEvent, db_for
from ..ownership import (
    NOW_SQL,
    Acquired,
    ClaimResult,
    Clock,
    LostRace,
    SteadyClock,
    db_now,
    engine_id_or_new,
    mark_disposing,
    mark_stopped,
    metrics,
    ownership_for,
)
from . import registry
from .backoff import RunBackoff
from .context import Context
from .payload import encode, error_info, one_line
from .port import HALTED, Abandon, Event, Park
from .prefetch import FirstTurnReads
from .replay import Replay, undecodable_history
from .runs import load_run
from .turn import Turn
from .writes import RunWrites

logger = logging.getLogger("weft_django.engine")

#: Seconds between the fast tick's reads of the database clock (:meth:`WorkflowEngine.tick_now`).
TICK_CLOCK_MAX_AGE = 1.0


def _ended(turn: Turn, how: str) -> None:
    """A run's unhappy end, committed: one WARNING line."""
    logger.warning("run %s (%s) %s", turn.run_id, turn.definition.name, how)


class TurnOutcome(enum.StrEnum):
    """How one turn of a run ended."""

    COMPLETED = "completed"
    FAILED = "failed"
    PARKED = "parked"
    TIMED_OUT = "timed_out"
    SUSPENDED = "suspended"  # nondeterminism: blocked with the error shown
    DEPOSED = "deposed"
    ABANDONED = "abandoned"  # stopping, or a database error: the claim is kept
    HALTED = "halted"  # the host's shutdown grace ended: stopped at a ctx operation
    NOT_HELD = "not_held"
    BUSY = "busy"
    MISSING = "missing"
    TERMINAL = "terminal"
    NOT_DUE = "not_due"
    NOT_ELIGIBLE = "not_eligible"
    THROTTLED = "throttled"  # its queue's slots or rate refused it: deferred (flow control)


#: Outcomes of a turn that got through to the database: they end a backoff.
PROGRESS = frozenset(
    {
        TurnOutcome.COMPLETED,
        TurnOutcome.FAILED,
        TurnOutcome.PARKED,
        TurnOutcome.TIMED_OUT,
        TurnOutcome.SUSPENDED,
    }
)


class WorkflowEngine:
    """One engine identity: its ownership strategy, engine row, and the turn driver.

    Implements :class:`~.writes.TurnHost` for the turns it drives.
    """

    def __init__(
        self,
        *,
        kind: str = EngineKind.WORKER,
        engine_id: str | None = None,
        settings: WeftSettings | None = None,
        using: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.kind = kind
        self.using = db_for(using)
        self.engine_id = engine_id_or_new(engine_id)
        self._clock = clock
        self.time_offset = timedelta(0)
        self.ownership = ownership_for(self.engine_id, self.settings, using=self.using, clock=clock)
        self.stopping = threading.Event()
        #: Set when a stopping host's grace is over: each running turn stops at its
        #: next ``ctx`` operation (:meth:`halt`).
        self.halted = threading.Event()
        self.backoff = RunBackoff()
        self.started = False
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._halted_runs: set[str] = set()
        self.first_turns = FirstTurnReads(self.using)
        self._tick_clock = SteadyClock(lambda: db_now(self.using), TICK_CLOCK_MAX_AGE)

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> WorkflowEngine:
        """Pass the boot gates of the ownership mode, then insert this engine's row."""
        self.ownership.boot(kind=self.kind, workflows=registry.registered_versions())
        self.started = True
        return self

    def dispose(self) -> None:
        """Stop taking claims; in-flight passes can no longer claim or drive."""
        self.stopping.set()
        self.ownership.dispose()
        if self.started:
            mark_disposing(self.engine_id, using=self.using)

    def halt(self) -> None:
        """Stop the running turns at their next ``ctx`` operation: nothing more is
        recorded, nothing is counted as a failure, the claims are kept (for the
        host's :meth:`shutdown` to release) and the runs resume from their last
        checkpoint on whichever engine drives them next."""
        self.stopping.set()
        self.halted.set()

    def shutdown(self) -> int:
        """Release every claim (epoch unchanged) and mark the engine stopped."""
        self.dispose()
        released = 0
        if self.started:
            released = self.ownership.release_all()
            mark_stopped(self.engine_id, using=self.using)
        return released

    def now(self) -> datetime:
        """Time for timer and deadline judgments: the database clock (+ test offset)."""
        base = self._clock() if self._clock is not None else db_now(self.using)
        return base + self.time_offset

    def tick_now(self) -> datetime:
        """:meth:`now` for the fast tick's judgments of which runs are due: on the
        database clock itself it is read at most once per
        :data:`TICK_CLOCK_MAX_AGE` seconds and counted forward on the monotonic
        clock in between (a busy tick runs many times a second); with an
        injected clock or a test offset, :meth:`now` itself."""
        if self.db_stamp() is None:
            return self.now()
        return self._tick_clock()

    def db_stamp(self) -> str | None:
        """SQL for "now" when the engine runs on the database clock itself (no
        injected clock, no test time offset); None otherwise. Whether a write
        can use it in one statement is the fence's per-vendor business."""
        if self._clock is not None or self.time_offset:
            return None
        return NOW_SQL.get(connections[self.using].vendor)

    # -- claims -----------------------------------------------------------------

    def acquire(self, run_id: str) -> ClaimResult:
        """Claim ``run_id`` for this engine according to the ownership mode."""
        if self.stopping.is_set():
            return LostRace(run_id, None)
        return self.ownership.acquire(run_id)

    def release(self, run_id: str, *, ended: bool = False) -> None:
        """Give up ``run_id``'s claim; ``ended``: the run is finished, suspended or
        gone (the release rule, :mod:`weft_django.ownership.claims.release`)."""
        self.ownership.release(run_id, ended=ended)

    def prefetch(self, run_ids: list[str]) -> int:
        """Read the first turns of runs this engine has just claimed, in one
        statement (:mod:`~.prefetch`); their turns then skip their own reads.

        Returns how many were read. A database error is logged and returns 0:
        the claims are taken and must still be driven, so each turn then reads
        for itself.
        """
        if not run_ids:
            return 0
        try:
            count = self.first_turns.load(run_ids)
        except DatabaseError as exc:
            logger.warning("could not read %d new runs ahead of their turns: %s", len(run_ids), exc)
            return 0
        flow.admit_ahead(  # their first turns' flow-control admission, per queue
            self.using,
            self.first_turns.peek(run_ids),
            self.ownership.fence_epoch,
            engine_id=self.engine_id,
            now=self.tick_now,
        )
        return count

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

    def in_flight_ids(self) -> frozenset[str]:
        """The runs with a turn running now (a snapshot)."""
        with self._lock:
            return frozenset(self._in_flight)

    def halted_runs(self) -> frozenset[str]:
        """The runs whose turn :meth:`halt` stopped (a snapshot)."""
        with self._lock:
            return frozenset(self._halted_runs)

    def drive(self, run_id: str) -> TurnOutcome:
        """Run one turn of a run this engine holds.

        A turn that fails on the database keeps the claim; the run is backed off
        (``self.backoff``) and, after too many refusals in a row, suspended.
        """
        if not self._begin(run_id):
            return TurnOutcome.BUSY
        try:
            try:
                outcome = self._drive(run_id)
            except DatabaseError as exc:
                outcome = self._failed_on_database(run_id, exc)
        finally:
            self._end(run_id)
        if outcome in PROGRESS:
            self.backoff.succeeded(run_id)
        metrics.turns.labels(outcome=outcome.value).inc()
        return outcome

    def _failed_on_database(self, run_id: str, error: BaseException | None) -> TurnOutcome:
        """Back off; suspend the run once the database has refused it ``limit`` times."""
        count = self.backoff.failed(run_id)
        if self.backoff.exhausted(count, error) and self._suspend_refused(run_id, error, count):
            return TurnOutcome.SUSPENDED
        logger.error(
            "turn of %s failed on the database (%d in a row; claim kept, retried after a "
            "backoff): %s",
            run_id,
            count,
            error,
        )
        return TurnOutcome.ABANDONED

    def _suspend_refused(self, run_id: str, error: BaseException | None, count: int) -> bool:
        """Suspend a run the database keeps refusing, with the error stored."""
        epoch = self.ownership.fence_epoch(run_id)
        run = load_run(run_id, using=self.using)
        if epoch is None or run is None:
            return False
        info = error_info(error) if error is not None else {"type": "DatabaseError"}
        info["message"] = (
            f"suspended after {count} consecutive turns refused by the database: "
            f"{info.get('message', '')}"
        )[:4000]
        try:
            RunWrites(self, run, epoch).finish([], RunStatus.SUSPENDED, error=info)
        except (Abandon, DatabaseError) as exc:
            logger.error("could not suspend %s after %d refusals: %s", run_id, count, exc)
            return False
        logger.warning("run %s %s", run_id, info["message"])  # "suspended after ..."
        self.backoff.succeeded(run_id)
        return True

    def _drive(self, run_id: str) -> TurnOutcome:
        prefetched = self.first_turns.take(run_id)
        epoch = self.ownership.fence_epoch(run_id)
        if epoch is None:
            return TurnOutcome.NOT_HELD
        run = prefetched or load_run(run_id, using=self.using)
        if run is None:
            self.release(run_id, ended=True)
            return TurnOutcome.MISSING
        if run["status"] in TERMINAL_STATUSES or run["status"] == RunStatus.SUSPENDED:
            self.release(run_id, ended=True)
            return TurnOutcome.TERMINAL
        # A run is replayed with its own version's code, only where it is registered
        # (the claim queries take only such runs; this holds for any other way in).
        if not registry.is_registered(run["workflow_name"], run["workflow_version"]):
            self.release(run_id)
            return TurnOutcome.NOT_ELIGIBLE
        definition = registry.get(run["workflow_name"], run["workflow_version"])
        # The clock is read only for runs that have a start time or a timeout.
        now = self.now() if run["start_at"] or run["timeout_at"] else None
        if run["status"] == RunStatus.PENDING and run["start_at"] and run["start_at"] > now:
            if run.get(flow.ADMITTED) is not None:  # taken at pickup: not used now
                flow.release(self.using, run_id, self.engine_id, run[flow.ADMITTED])
            return TurnOutcome.NOT_DUE
        limits = flow.limits_for(run)
        if limits is not None:
            return self._drive_limited(run, definition, epoch, limits)
        return self._turn(run, Turn(self, run, definition, epoch), epoch, now)

    def _drive_limited(
        self, run: dict[str, Any], definition: Any, epoch: int, limits: QueueLimits
    ) -> TurnOutcome:
        """A turn of a run whose queue has limits (docs/flow-control.md): admitted
        (slots and tokens taken), driven, its slots freed; or deferred."""
        now = self.tick_now()  # the database clock, read at most once a second
        if run.get(flow.ADMITTED) != epoch:  # not admitted at pickup (flow.admit_ahead)
            refused = flow.admit_or_defer(self, run, epoch, limits, now)
            if refused is not None:
                return TurnOutcome(refused)
        turn = Turn(self, run, definition, epoch, holds_slots=True)
        try:
            return self._turn(run, turn, epoch, now)
        finally:
            if turn.holds_slots:  # not freed by its last write (cut off, or failed)
                flow.release(self.using, run["id"], self.engine_id, epoch)

    def _turn(
        self, run: dict[str, Any], turn: Turn, epoch: int, now: datetime | None
    ) -> TurnOutcome:
        run_id = run["id"]
        try:
            # The wake hint read with the run is cleared by this turn's park, in the
            # same statement and only if it is still the one read (a later hint
            # survives and brings another turn); a turn cut off before it ends
            # leaves it, so whoever drives the run next is woken.
            if now is not None and run["timeout_at"] is not None and now >= run["timeout_at"]:
                turn.finish(
                    [],
                    RunStatus.TIMED_OUT,
                    error={"type": "TimedOut", "message": "execution timeout reached"},
                )
                _ended(turn, "timed out: its execution timeout was reached")
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
        # A pending run has no history: every first write of a turn moves the run
        # out of pending in the same statement or transaction (a checkpoint marks it
        # running, a park waiting; resume makes a run with history waiting). Its
        # first turn skips the read. Were that ever false, the unique (run, seq)
        # constraint refuses the replayed checkpoint: the turn fails on the
        # database and nothing is recorded twice.
        history = [] if run["status"] == RunStatus.PENDING else self._load_events(turn.run_id)
        unreadable = undecodable_history(run, history)
        if unreadable is not None:  # cannot be replayed, now or ever: fail it, once
            turn.finish([], RunStatus.FAILED, error=error_info(unreadable, with_traceback=False))
            _ended(turn, f"failed: {one_line(unreadable)}")
            return TurnOutcome.FAILED
        replay = Replay(turn.run_id, history)
        ctx = Context(turn, replay)
        failure: BaseException | None
        try:
            if replay.poisoned is not None:
                raise replay.poisoned
            value = turn.definition.fn(ctx, *run["args"], **run["kwargs"])
        except Park as park:
            if replay.poisoned is None:
                turn.park(replay.take_buffer(), park.waiting_on, park.wake_at)
                return TurnOutcome.PARKED
            value, failure = None, replay.poisoned
        except Abandon:
            raise
        except Exception as exc:
            value, failure = None, exc
        else:
            failure = None
        if replay.poisoned is None:
            replay.check_replayed_to_end(failure)
        if replay.poisoned is not None:
            turn.finish([], RunStatus.SUSPENDED, error=error_info(replay.poisoned))
            _ended(turn, f"suspended: {one_line(replay.poisoned)}")
            return TurnOutcome.SUSPENDED
        if failure is None:
            try:
                result = encode(value, f"result of workflow {turn.run_id!r}")
            except PayloadError as exc:
                failure = exc
        if failure is not None:
            turn.finish(replay.take_buffer(), RunStatus.FAILED, error=error_info(failure))
            _ended(turn, f"failed: {one_line(failure)}")
            return TurnOutcome.FAILED
        turn.finish(replay.take_buffer(), RunStatus.COMPLETED, result=result)
        return TurnOutcome.COMPLETED

    def _abandoned(self, run_id: str, epoch: int, abandoned: Abandon) -> TurnOutcome:
        if abandoned.reason == "deposed":
            if self.ownership.forget(run_id, epoch):
                metrics.claim_attempts.labels(outcome="deposed").inc()
            logger.warning("engine %s was deposed from %s; dropping it", self.engine_id, run_id)
            return TurnOutcome.DEPOSED
        if abandoned.reason == "database":
            return self._failed_on_database(run_id, abandoned.cause)
        if abandoned.reason == HALTED:
            with self._lock:
                self._halted_runs.add(run_id)
            logger.debug("turn of %s stopped at its next operation (shutdown grace over)", run_id)
            return TurnOutcome.HALTED
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
