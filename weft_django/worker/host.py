"""The worker: the engine host behind ``manage.py weft_worker`` (docs/architecture.md).

A :class:`Worker` owns one :class:`~weft_django.runtime.engine.WorkflowEngine`
and schedules its work. Until stopped it runs:

* the **fast tick** (main thread, every ``TICK_INTERVAL`` or at once on a
  wake-up): queue held runs that are due, then claim new pending runs;
* the **renewal loop** (its own thread, every renew interval): pass 1, renew;
* the **scan loop** (another thread, same cadence, so a slow scan never makes
  renewal late): pass 2 reclaim, pass 3 signal poll, pass 4 update poll,
  then the timeout sweep;
* a pool of ``concurrency`` executor threads that drive turns;
* the **schedule pass** (``weft-schedules``, when schedules are declared and
  ``schedules`` is on): fires cron ticks while this worker holds the schedule
  lease (:mod:`weft_django.worker.schedule_thread`);
* a wake-up listener (PostgreSQL ``LISTEN``, or SQLite's change watch).

The loops' bodies and the optional threads (pruner, schedules, wake-ups) are
in :mod:`weft_django.worker.threads`.

What each pass does, and which runs are selected and claimed, is the engine's
ownership strategy's business (:mod:`weft_django.ownership.modes`); this
module only decides when.

``stop()`` marks the engine disposing first, so no pass still in flight can
take a claim or drive a reclaimed run; in-flight turns get a grace period,
after which each still running stops at its next ``ctx`` operation
(:mod:`weft_django.worker.shutdown`); then every claim is released (epoch
unchanged) and the engine marked stopped.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from ..conf import WeftSettings, get_settings
from ..models import EngineKind, db_for
from ..ownership import Outcome, PassResult
from ..runtime import registry
from ..runtime.engine import TurnOutcome, WorkflowEngine
from ..runtime.passes.renewal import EnginePasses
from .logs import TurnCounts, log_started, log_status
from .metrics import DEFAULT_METRICS_ADDR, metrics_address, serve_metrics
from .pool import TurnPool, close_connections, end_idle_transactions, recycle_connections
from .shutdown import HALT_WAIT, Drained, drain, on_stop_signals, release_and_stop
from .supervision import RenewalWatch, Supervisor, safely
from .threads import SCAN_PASSES, Passes, optional_threads, pass_loop

logger = logging.getLogger("weft_django.worker")


class Worker:
    """Run an engine until stopped. Every tunable is keyword-only."""

    def __init__(
        self,
        *,
        concurrency: int = 4,
        once: bool = False,
        metrics_port: int | None = None,
        metrics_addr: str = DEFAULT_METRICS_ADDR,
        install_signal_handlers: bool = True,
        shutdown_grace: float = 30.0,
        status_interval: float = 60.0,
        batch_size: int | None = None,
        exit_after: float | None = None,
        settings: WeftSettings | None = None,
        using: str | None = None,
        engine: WorkflowEngine | None = None,
        on_pass: Callable[[PassResult], None] | None = None,
        schedules: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.settings = settings or get_settings()
        self.concurrency = concurrency
        self.once = once
        self.metrics_port = metrics_port
        self.metrics_addr = metrics_address(metrics_addr)
        self.metrics_server: Any = None  # once started (metrics_port set)
        self.install_signal_handlers = install_signal_handlers
        self.shutdown_grace = shutdown_grace
        self.status_interval = status_interval
        self.batch_size = batch_size or max(concurrency * 2, 4)
        self.using = db_for(using)
        self.engine = engine or WorkflowEngine(
            kind=EngineKind.WORKER, settings=self.settings, using=self.using
        )
        self.ownership = self.engine.ownership
        self.timing = self.ownership.timing
        self._wake = threading.Event()
        self.pool = TurnPool(
            self._drive_one, stopped=self.engine.stopping.is_set, on_done=self._wake.set
        )
        self.passes = EnginePasses(self.engine, submit=self._submit, busy=self.pool.is_queued)
        self.on_pass = on_pass
        self.schedules = schedules
        # Without a renewal for longer than the TTL the worker stops claiming and
        # driving; with renewals failing for ``exit_after`` (default 2 x TTL) it exits 1.
        self.watch = RenewalWatch(ttl=self.timing.ttl, exit_after=exit_after or 2 * self.timing.ttl)
        self.exit_code = 0
        self._undo_session_setup: Callable[[], None] | None = None
        self._stop = threading.Event()
        self.supervisor = Supervisor(self._stop)
        self._notified = threading.Event()  # a wake-up arrived: check due runs now
        self._scans_done = threading.Event()
        #: What happened since the last status line (turn outcomes, reclaims).
        self.counts = TurnCounts()
        self._taken_over_seen = 0
        self._stop_asked_at: float | None = None

    # -- public lifecycle -----------------------------------------------------------

    def run(self) -> int:
        """Boot, work until stopped (or idle with ``once``), shut down.

        Returns the exit code: 0, or 1 when the worker gave up because it could
        not renew its lease (a process supervisor should start a fresh one).
        """
        try:
            self._boot()
            self._main_loop()
        finally:
            # Also when boot failed half-way (e.g. the metrics port is taken):
            # an engine row that was registered is marked stopped, not left live.
            self._shutdown()
        return self.exit_code

    def stop(self) -> None:
        """Ask the worker to stop; safe from a signal handler and from any thread.

        The engine is marked disposing before anything else, in memory: that is
        what an in-flight pass checks before it claims or drives, so none can
        take a new claim from here on. Nothing is written here (a signal
        handler runs in the middle of whatever the main thread was doing,
        possibly inside a transaction on the same connection): the engine row's
        ``disposing`` status is written by the shutdown that follows. The
        shutdown grace counts from the first call.
        """
        if self._stop_asked_at is None:
            self._stop_asked_at = time.monotonic()
        self.engine.stopping.set()
        self.ownership.dispose()
        self._stop.set()
        self._wake.set()

    # -- boot -----------------------------------------------------------------------

    def _boot(self) -> None:
        # The handlers first: once the engine row is registered, a SIGTERM (a
        # supervisor, a deploy) must be a graceful stop, never the default kill.
        if self.install_signal_handlers:
            on_stop_signals(self.stop, self.shutdown_grace)
        self.engine.start()
        log_started(
            self.engine.engine_id,
            self.ownership.name,
            self.using,
            self.timing,
            tick=self.settings.tick_interval,
            concurrency=self.concurrency,
        )
        self.ownership.warn_if_crowded()
        self._undo_session_setup = end_idle_transactions(
            self.using, self.settings.idle_in_transaction_timeout
        )
        if self.metrics_port is not None:
            self.metrics_server = serve_metrics(self.metrics_addr, self.metrics_port)
        for index in range(self.concurrency):
            self._spawn(f"weft-turn-{index}", self.pool.serve)
        # One more thread for wake-ups only (signals, updates, timers, children):
        # a woken run starts its turn at once even while every turn thread is busy.
        self._spawn("weft-turn-wake", functools.partial(self.pool.serve, urgent_only=True))
        self._spawn("weft-renewal", self._renewal_loop)
        self._spawn("weft-scans", self._scan_loop)
        # The pruner, the schedule firer, the wake-up listener: when configured.
        for name, target in optional_threads(
            self.engine.engine_id,
            self.settings,
            self._stop,
            using=self.using,
            schedules=self.schedules and not self.once,
            on_notify=self._on_notify,
        ):
            self._spawn(name, target)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        self.supervisor.spawn(name, target)

    # -- fast tick ------------------------------------------------------------------

    def _main_loop(self) -> None:
        last_status = time.monotonic()
        last_due_check = -math.inf
        idle_ticks = 0
        tick = self.settings.tick_interval
        while not self._stop.is_set():
            self._wake.clear()
            if self.watch.gives_up():
                self.exit_code = 1
                break
            # The due-runs query runs on a wake-up and once per tick interval, not
            # after every finished turn (a finished turn wakes the loop to refill
            # the queue; it makes no other run of this engine due).
            check_due = self._notified.is_set() or time.monotonic() - last_due_check >= tick
            if check_due:
                self._notified.clear()
                last_due_check = time.monotonic()
            found = safely("tick", functools.partial(self._tick, check_due=check_due))
            if self.once:
                # Idle only counts on ticks that also looked for due runs.
                idle = check_due and not found and self.pool.idle() and self._scans_done.is_set()
                idle_ticks = idle_ticks + 1 if idle else 0
                if idle_ticks >= 2:
                    logger.info("idle: --once worker exiting")
                    break
            if time.monotonic() - last_status >= self.status_interval:
                last_status = time.monotonic()
                self._log_status()
            # Sleep until the next due check (a turn that ended in between must
            # not push it a whole interval further), or until woken.
            self._wake.wait(max(last_due_check + tick - time.monotonic(), 0.001))

    def _capacity(self) -> int:
        return self.batch_size - self.pool.queued()

    def _tick(self, *, check_due: bool = True) -> int:
        """One fast tick: queue held runs that are due, then take new pending runs.

        New runs are claimed in batches: only when the local queue is empty or at
        most half full, so a busy worker does not pay a claim transaction for
        every turn that ends.
        """
        if not self._may_drive() or not self.ownership.can_drive():
            return 0
        refill = self._capacity() >= max(self.batch_size // 2, 1) or self.pool.idle()
        # Retries first: taking them and queueing them touches no database, so a
        # database error further down cannot lose them.
        found = 0
        for run_id in self.pool.take_retries():
            found += self._submit(run_id)
        if not (check_due or refill):
            return found
        now = self.engine.tick_now()
        names = registry.served()  # names with their versions: only runs we can replay
        if check_due:
            # Woken runs go ahead of new work, past the batch limit: a wake-up never
            # waits for a full queue of new runs to drain. A run queued or
            # in a turn when the query starts is left out even if its turn has ended
            # since: the query may have read it before that turn's writes (a claimed
            # new run is still pending there) and would drive it again for nothing.
            # A wake hint it really has survives its turn: the next check finds it.
            busy = self.pool.queued_ids()
            for run_id in self.ownership.due_runs(now, names, limit=self.batch_size * 4):
                if run_id in busy or self.pool.is_queued(run_id):
                    continue
                if self.ownership.check_wake(run_id, "tick"):
                    found += self._submit(run_id, urgent=True)
        capacity = self._capacity()
        if refill and capacity > 0:
            claimed = self.ownership.claim_pending(now, names, capacity)
            self.engine.prefetch(claimed)
            for run_id in claimed:
                found += self._submit(run_id)
        return found

    def _on_notify(self) -> None:
        """A wake source (NOTIFY, SQLite change watch) saw a commit: tick at once."""
        self._notified.set()
        self._wake.set()

    # -- driving --------------------------------------------------------------------

    def _may_drive(self) -> bool:
        """Not stopping, and renewed within the TTL (else it may have been deposed)."""
        return not self.engine.stopping.is_set() and self.watch.allows_driving()

    def _submit(self, run_id: str, *, urgent: bool = False) -> bool:
        """Queue one turn of ``run_id`` (once at a time per run). A run backed off
        after database failures waits in the retry set until its backoff ends. A run
        that may not be driven now (renewal lapsed) waits there too: the caller has
        already taken it from the retry set or the scan that found it, and nothing
        else would bring it back; only a stopping worker drops it (it releases or
        keeps the claim on the way out)."""
        if self.engine.stopping.is_set():
            return False
        if not self.watch.allows_driving():
            self.pool.retry_later(run_id)
            return False
        if not self.engine.backoff.ready(run_id):
            self.pool.retry_later(run_id)
            return False
        return self.pool.submit(run_id, urgent=urgent)

    def _drive_one(self, run_id: str) -> bool:
        """One turn on an executor thread; True when the run should be retried."""
        try:
            recycle_connections()
            outcome = self.engine.drive(run_id)
            self.counts.add(outcome.value)
            logger.debug("turn of %s: %s", run_id, outcome.value)
            return outcome == TurnOutcome.ABANDONED
        except Exception:
            logger.exception("turn of %s failed; the claim is kept and retried", run_id)
            self.engine.backoff.failed(run_id)
            return True
        finally:
            try:
                recycle_connections()
            except Exception:
                logger.exception("after the turn of %s: could not recycle connections", run_id)

    # -- the renewal loop's passes ------------------------------------------------------

    def _loop(self, passes: Passes, *, after: Callable[[], None] = lambda: None) -> None:
        """Run ``passes`` in order every renew interval until stopped; then record
        their summaries on the engine row (:func:`~weft_django.worker.threads.pass_loop`)."""
        record, interval = self.passes.record, self.timing.renew_interval
        pass_loop(passes, self._stop, interval, self._publish, record, after=after)

    def _renewal_loop(self) -> None:
        self._loop((("renew", self._renew_pass),))

    def _renew_pass(self) -> PassResult:
        could = self.ownership.can_drive()
        try:
            result = self.passes.renew()
        except Exception:
            self.watch.failed()
            raise
        if result.succeeded:
            self.watch.renewed()
        else:
            self.watch.failed()
        if not could and self.ownership.can_drive():
            self._wake.set()  # e.g. took the global lease: work at once
        return result

    def _scan_loop(self) -> None:
        passes = tuple((name, getattr(self.passes, name)) for name in SCAN_PASSES)
        self._loop(passes, after=self._scans_done.set)

    def _publish(self, result: PassResult) -> None:
        if result.name == "reclaim":
            self.counts.add("reclaimed", result.count(Outcome.RECLAIMED))
        self.passes.keep(result)
        if self.on_pass is not None:
            self.on_pass(result)

    @property
    def last_passes(self) -> dict[str, PassResult]:
        """The last result of each pass, by name."""
        return self.passes.last()

    # -- status and shutdown ------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "engine_id": self.engine.engine_id,
            "held_claims": self.ownership.held_count(),
            "running_turns": self.engine.in_flight,
            "queued_turns": self.pool.queued(),
            "turns_done": self.pool.turns_done,
            "passes": {
                name: {"seconds": round(p.seconds, 4), "counts": dict(p.counts)}
                for name, p in self.last_passes.items()
            },
        }

    def _log_status(self) -> None:
        counts = self.counts.take()
        taken_over = self.ownership.claims.taken_over
        counts["taken_over"] = taken_over - self._taken_over_seen
        self._taken_over_seen = taken_over
        log_status(self.ownership.held_count(), self.engine.in_flight, self.pool.queued(), counts)

    def _shutdown(self) -> None:
        self.stop()
        if not self.engine.started:
            return  # the boot gates refused: no thread was started, nothing written
        safely("dispose", self.engine.dispose)  # status: disposing
        since = self._stop_asked_at if self._stop_asked_at is not None else time.monotonic()
        drained = Drained()
        if self.supervisor.threads:
            drained = drain(self.engine, self.pool, grace=self.shutdown_grace, since=since)
        # The other threads have had the grace to end (a blocked turn's never
        # does): wait for them no later than the grace and the halt allow.
        budget = since + self.shutdown_grace + HALT_WAIT + 0.5 - time.monotonic()
        self.supervisor.join(min(max(self.timing.renew_interval, 2.0), max(budget, 0.2)))
        recycle_connections()
        release_and_stop(self.engine, blocked=bool(drained.stuck))
        if self._undo_session_setup is not None:
            self._undo_session_setup()
        close_connections()
