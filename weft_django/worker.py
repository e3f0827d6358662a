"""The worker: the engine host behind ``manage.py weft_worker`` (DESIGN.md §6).

A :class:`Worker` owns one :class:`~weft_django.runtime.engine.WorkflowEngine`
and runs, until stopped:

* the **fast tick** (main thread, every ``TICK_INTERVAL`` or at once on a
  PostgreSQL ``NOTIFY``): claim new pending runs and drive held runs that have
  a wake hint or a due timer;
* the **renewal loop** (its own thread, every renew interval): pass 1, renew;
* the **scan loop** (another thread, same cadence, so a slow scan never makes
  renewal late): pass 2 reclaim, pass 3 signal poll, pass 4 update poll;
* a pool of ``concurrency`` executor threads that drive turns;
* a ``LISTEN`` thread on PostgreSQL.

``stop()`` marks the engine disposing first, so no pass still in flight can
take a claim or drive a reclaimed run; in-flight turns get a grace period,
then every claim is released (epoch unchanged) and the engine marked stopped.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.db.models import OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce

from . import wakeups
from .conf import MODE_LEASE, MODE_NONE, WeftSettings, get_settings
from .exceptions import WeftSecondEngineWarning, warn
from .models import Claim, EngineKind, RunStatus, WorkflowRun
from .notify import notify_enabled
from .ownership import metrics, scans
from .ownership.engines import other_live_engines
from .ownership.passes import PassResult
from .ownership.reclaim import reclaim_scan
from .ownership.results import Acquired
from .ownership.signal_poll import signal_poll_pass
from .ownership.update_poll import EngineUpdateTarget, update_poll_pass
from .pool import TurnPool, close_connections, recycle_connections
from .runtime import registry
from .runtime.engine import WorkflowEngine

logger = logging.getLogger("weft_django.worker")


class Worker:
    """Run an engine until stopped. Every tunable is keyword-only."""

    def __init__(
        self,
        *,
        concurrency: int = 4,
        once: bool = False,
        metrics_port: int | None = None,
        install_signal_handlers: bool = True,
        shutdown_grace: float = 30.0,
        status_interval: float = 60.0,
        batch_size: int | None = None,
        settings: WeftSettings | None = None,
        using: str = "default",
        engine: WorkflowEngine | None = None,
        on_pass: Callable[[PassResult], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.settings = settings or get_settings()
        self.concurrency = concurrency
        self.once = once
        self.metrics_port = metrics_port
        self.install_signal_handlers = install_signal_handlers
        self.shutdown_grace = shutdown_grace
        self.status_interval = status_interval
        self.batch_size = batch_size or max(concurrency * 2, 4)
        self.using = using
        self.engine = engine or WorkflowEngine(
            kind=EngineKind.WORKER, settings=self.settings, using=using
        )
        self.on_pass = on_pass
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._notified = threading.Event()  # a NOTIFY arrived: check due runs now
        self._queued: set[str] = set()
        self._queued_lock = threading.Lock()
        self._retry_drive: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._pool: TurnPool | None = None
        self._signals_seen = 0
        self.last_passes: dict[str, PassResult] = {}
        self.turns_done = 0
        self._scans_done = threading.Event()

    # -- public lifecycle -----------------------------------------------------------

    def run(self) -> int:
        """Boot, work until stopped (or idle with ``once``), shut down. Returns 0."""
        try:
            self._boot()
            self._main_loop()
        finally:
            # Also when boot failed half-way (e.g. the metrics port is taken):
            # an engine row that was registered is marked stopped, not left live.
            self._shutdown()
        return 0

    def stop(self) -> None:
        """Ask the worker to stop; safe from a signal handler and from any thread.

        The engine is marked disposing before anything else, in memory: that is
        what an in-flight pass checks before it claims or drives, so none can
        take a new claim from here on. Nothing is written here (a signal
        handler runs in the middle of whatever the main thread was doing,
        possibly inside a transaction on the same connection): the engine row's
        ``disposing`` status is written by the shutdown that follows.
        """
        self.engine.stopping.set()
        self.engine.claims.disposing = True
        self._stop.set()
        self._wake.set()

    # -- boot -----------------------------------------------------------------------

    def _boot(self) -> None:
        self.engine.start()
        if self.install_signal_handlers:
            self._install_signal_handlers()
        s = self.settings
        vendor = connections[self.using].vendor
        name = connections[self.using].settings_dict.get("NAME")
        logger.info(
            "weft worker %s started: mode=%s database=%s:%s ttl=%gs renew=%gs "
            "tick=%gs concurrency=%d workflows=%s",
            self.engine.engine_id,
            s.ownership,
            vendor,
            name,
            s.ttl,
            s.renew_interval,
            s.tick_interval,
            self.concurrency,
            ", ".join(registry.registered_names()) or "(none registered)",
        )
        if s.ownership == MODE_NONE:
            others = other_live_engines(
                self.engine.engine_id, grace=2 * s.renew_interval, using=self.using
            )
            if others:
                warn(
                    WeftSecondEngineWarning(
                        "Ownership mode 'none' allows one worker only, but other live "
                        f"engines share this database: {', '.join(e.id for e in others)}. "
                        "Runs may execute twice; use 'workflow-lease'."
                    )
                )
        if self.metrics_port is not None:
            from prometheus_client import start_http_server

            start_http_server(self.metrics_port, registry=metrics.REGISTRY)
            logger.info("metrics on :%d/metrics", self.metrics_port)
        self._pool = TurnPool(self._drive_unit)
        for index in range(self.concurrency):
            self._spawn(f"weft-turn-{index}", self._pool.serve)
        self._spawn("weft-renewal", self._renewal_loop)
        self._spawn("weft-scans", self._scan_loop)
        if notify_enabled(self.using):
            self._spawn(
                "weft-listen",
                functools.partial(wakeups.listen, self.using, self._stop, self._on_notify),
            )
        elif wakeups.can_watch_sqlite(self.using, self.settings):
            self._spawn(
                "weft-sqlite-watch",
                functools.partial(
                    wakeups.watch_sqlite,
                    self.using,
                    self._stop,
                    self._on_notify,
                    poll=min(0.01, self.settings.tick_interval),
                ),
            )

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=self._thread_main, args=(target,), name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _thread_main(self, target: Callable[[], None]) -> None:
        try:
            target()
        finally:
            close_connections()

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handle(signum: int, frame: Any) -> None:
            self._signals_seen += 1
            if self._signals_seen > 1:
                logger.warning("second signal: exiting at once")
                os._exit(130)
            logger.info("signal %s: shutting down gracefully", signal.Signals(signum).name)
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    # -- fast tick ------------------------------------------------------------------

    def _main_loop(self) -> None:
        last_status = time.monotonic()
        last_due_check = -math.inf
        idle_ticks = 0
        while not self._stop.is_set():
            self._wake.clear()
            # The due-runs query runs on a NOTIFY and once per tick interval, not
            # after every finished turn (a finished turn wakes the loop to refill
            # the queue; it makes no other run of this engine due).
            check_due = (
                self._notified.is_set()
                or time.monotonic() - last_due_check >= self.settings.tick_interval
            )
            if check_due:
                self._notified.clear()
                last_due_check = time.monotonic()
            found = self._safely("tick", functools.partial(self._tick, check_due=check_due))
            if self.once:
                # Idle only counts on ticks that also looked for due runs.
                idle = check_due and not found and self._idle() and self._scans_done.is_set()
                idle_ticks = idle_ticks + 1 if idle else 0
                if idle_ticks >= 2:
                    logger.info("idle: --once worker exiting")
                    break
            if time.monotonic() - last_status >= self.status_interval:
                last_status = time.monotonic()
                self._log_status()
            # Sleep until the next due check (a turn that ended in between must
            # not push it a whole interval further), or until woken.
            next_due = last_due_check + self.settings.tick_interval
            self._wake.wait(max(next_due - time.monotonic(), 0.001))

    def _safely(self, what: str, fn: Callable[[], Any]) -> Any:
        recycle_connections()
        try:
            return fn()
        except DatabaseError as exc:
            logger.warning("%s: database error, retried next time: %s", what, exc)
            return None
        except Exception:
            logger.exception("%s failed; retried next time", what)
            return None
        finally:
            recycle_connections()

    def _capacity(self) -> int:
        with self._queued_lock:
            return self.batch_size - len(self._queued)

    def _idle(self) -> bool:
        with self._queued_lock:
            return not self._queued

    def _tick(self, *, check_due: bool = True) -> int:
        """One fast tick: wake held runs that are due, then take new pending runs.

        New runs are claimed in batches: only when the local queue is empty or at
        most half full, so a busy worker does not pay a claim transaction for
        every turn that ends.
        """
        engine = self.engine
        if engine.stopping.is_set():
            return 0
        if engine.mode == MODE_LEASE and not self._holds_global_lease():
            return 0
        with self._queued_lock:
            retry, self._retry_drive = self._retry_drive, set()
        capacity = self._capacity()
        refill = capacity >= max(self.batch_size // 2, 1) or self._idle()
        if not (check_due or refill or retry):
            return 0
        now = engine.now()
        found = 0
        if check_due:
            for run_id in self._due_runs(now):
                if self._capacity() <= 0:
                    break
                with self._queued_lock:
                    if run_id in self._queued:
                        continue
                if engine.mode == MODE_LEASE or engine.claims.check_wake(run_id, "tick"):
                    found += self._submit(run_id)
        for run_id in retry:
            found += self._submit(run_id)
        capacity = self._capacity()
        if refill and capacity > 0:
            for run_id in self._claim_pending(now, capacity):
                found += self._submit(run_id)
        return found

    def _due_runs(self, now: Any) -> list[str]:
        engine = self.engine
        if engine.mode == MODE_LEASE:
            # Registered types only: a due run this worker cannot drive would
            # otherwise be picked (and turned away) on every tick.
            return list(
                WorkflowRun.objects.using(self.using)
                .filter(status__in=(RunStatus.RUNNING, RunStatus.WAITING))
                .filter(workflow_name__in=registry.registered_names())
                .filter(Q(wake_hint_at__isnull=False) | Q(wake_at__lte=now))
                .order_by("pk")
                .values_list("pk", flat=True)[: self.batch_size * 4]
            )
        return scans.held_due(engine.engine_id, now, limit=self.batch_size * 4, using=self.using)

    def _claim_pending(self, now: Any, capacity: int) -> list[str]:
        """Claim up to ``capacity`` due pending runs (SKIP LOCKED on PostgreSQL)."""
        engine = self.engine
        names = registry.registered_names()
        query = (
            WorkflowRun.objects.using(self.using)
            .filter(status=RunStatus.PENDING, workflow_name__in=names)
            .filter(Q(start_at__isnull=True) | Q(start_at__lte=now))
            .order_by("created_at", "pk")
        )
        won: list[str] = []
        if engine.mode == MODE_LEASE:
            return list(query.values_list("pk", flat=True)[:capacity])
        # The claim's epoch comes with the run (0: no claim row yet), so each
        # acquire is one conditional write, without reading the claim first.
        query = query.filter(~scans.has_holder()).annotate(
            claim_epoch=Coalesce(
                Subquery(Claim.objects.filter(workflow_id=OuterRef("pk")).values("epoch")[:1]),
                Value(0),
            )
        )
        claims = engine.claims

        def acquire(rows: list[tuple[str, int]]) -> list[str]:
            return [
                run_id
                for run_id, epoch in rows
                if isinstance(claims.acquire(run_id, expected_epoch=epoch), Acquired)
            ]

        if connections[self.using].features.has_select_for_update_skip_locked:
            with transaction.atomic(using=self.using):
                rows = list(
                    query.select_for_update(skip_locked=True, of=("self",)).values_list(
                        "pk", "claim_epoch"
                    )[:capacity]
                )
                won = acquire(rows)
        else:
            won = acquire(list(query.values_list("pk", "claim_epoch")[:capacity]))
        return won

    # -- driving --------------------------------------------------------------------

    def _submit(self, run_id: str) -> int:
        """Queue one turn of ``run_id`` on the executor (once at a time per run)."""
        if self._pool is None or self.engine.stopping.is_set():
            return 0
        with self._queued_lock:
            if run_id in self._queued:
                return 0
            self._queued.add(run_id)
        if not self._pool.submit(run_id):  # shut down
            with self._queued_lock:
                self._queued.discard(run_id)
            return 0
        return 1

    def _drive_unit(self, run_id: str) -> None:
        if self.engine.stopping.is_set():
            with self._queued_lock:  # queued before the stop: not started, not retried
                self._queued.discard(run_id)
            return
        recycle_connections()
        retry = False
        try:
            outcome = self.engine.drive(run_id)
            with self._queued_lock:
                self.turns_done += 1
            retry = outcome.value == "abandoned"
        except Exception:
            logger.exception("turn of %s failed; the claim is kept and retried", run_id)
            retry = True
        finally:
            with self._queued_lock:
                self._queued.discard(run_id)
                if retry and not self.engine.stopping.is_set():
                    self._retry_drive.add(run_id)
            recycle_connections()
            self._wake.set()

    # -- renewal and scans ------------------------------------------------------------

    def _renewal_loop(self) -> None:
        interval = self.settings.renew_interval
        while not self._stop.is_set():
            began = time.monotonic()
            self._safely("renew", self._renew_pass)
            self._stop.wait(max(interval - (time.monotonic() - began), 0.0))

    def _renew_pass(self) -> None:
        engine = self.engine
        with metrics.pass_seconds.labels(pass_name="renew").time():
            if engine.global_lease is not None:
                had = engine.global_lease.held
                holds = engine.global_lease.renew() if had else False
                if not holds and not engine.stopping.is_set():
                    holds = engine.global_lease.try_acquire()
                    if holds:
                        logger.info("took the global lease (epoch %s)", engine.global_lease.epoch)
                        self._wake.set()
                if had and not holds:
                    logger.warning("lost the global lease; standing by")
            renewal = engine.claims.renew()
        result = PassResult("renew", started_at=renewal.started_at)
        result.finished_at = renewal.finished_at
        for run_id, outcome in renewal.outcomes.items():
            result.record(run_id, outcome)
        for outcome, count in result.counts.items():
            metrics.pass_outcomes.labels(pass_name="renew", outcome=outcome).inc(count)
        self._publish(result)

    def _scan_loop(self) -> None:
        interval = self.settings.renew_interval
        while not self._stop.is_set():
            began = time.monotonic()
            for name, fn in (
                ("reclaim", self._reclaim_pass),
                ("signal_poll", self._signal_pass),
                ("update_poll", self._update_pass),
            ):
                if self._stop.is_set():
                    break
                with metrics.pass_seconds.labels(pass_name=name).time():
                    self._safely(name, fn)
            self._safely("timeouts", self._timeout_pass)
            self._scans_done.set()
            self._stop.wait(max(interval - (time.monotonic() - began), 0.0))

    def _reclaim_pass(self) -> None:
        if self.engine.mode == MODE_LEASE:
            self._publish(self._lease_recovery())
            return
        self._publish(reclaim_scan(self.engine, drive=self._submit))

    def _holds_global_lease(self) -> bool:
        lease = self.engine.global_lease
        return lease is not None and lease.held

    def _lease_recovery(self) -> PassResult:
        """Mode ``lease``: drive the runs a previous lease holder left mid-turn.

        A run that was ``running`` when its holder died has no wake hint and no
        due timer, so the fast tick never finds it; without this the standby
        that takes the lease over would strand it. Any ``running`` run of a
        registered type that this engine is not driving (and was not driving
        when the query began) is one of those.
        """
        engine = self.engine
        result = PassResult("reclaim", started_at=engine.now())
        began = time.monotonic()
        if self._holds_global_lease() and not engine.stopping.is_set():
            with self._queued_lock:
                busy = set(self._queued)
            orphans = (
                WorkflowRun.objects.using(self.using)
                .filter(status=RunStatus.RUNNING, workflow_name__in=registry.registered_names())
                .order_by("pk")
                .values_list("pk", flat=True)[:500]
            )
            for run_id in orphans:
                if run_id in busy:
                    continue
                result.record(run_id, "reclaimed" if self._submit(run_id) else "not_eligible")
        result.finished_at = result.started_at + timedelta(seconds=time.monotonic() - began)
        for outcome, count in result.counts.items():
            metrics.pass_outcomes.labels(pass_name="reclaim", outcome=outcome).inc(count)
        return result

    def _signal_pass(self) -> None:
        engine = self.engine
        if engine.mode == MODE_LEASE and not self._holds_global_lease():
            return
        held = (
            list(engine.claims.held)
            if engine.mode != MODE_LEASE
            else list(
                WorkflowRun.objects.using(self.using)
                .filter(status=RunStatus.WAITING, workflow_name__in=registry.registered_names())
                .values_list("pk", flat=True)
            )
        )
        self._publish(
            signal_poll_pass(held, wake=self._wake_for_signal, now=engine.now(), using=self.using)
        )

    def _wake_for_signal(self, run_id: str) -> None:
        if self.engine.mode == MODE_LEASE or self.engine.claims.check_wake(run_id, "signal"):
            self._submit(run_id)

    def _update_pass(self) -> None:
        engine = self.engine
        if engine.mode == MODE_LEASE and not (engine.global_lease and engine.global_lease.held):
            return
        target = EngineUpdateTarget(engine, schedule=self._schedule, using=self.using)
        self._publish(update_poll_pass(target, clock=engine.now).as_pass_result())

    def _schedule(self, run_id: str) -> bool:
        """Make sure a turn of ``run_id`` is coming (queued now, or queued already)."""
        if self._submit(run_id):
            return True
        with self._queued_lock:
            return run_id in self._queued and not self.engine.stopping.is_set()

    def _on_notify(self) -> None:
        """A wake source (NOTIFY, SQLite change watch) saw a commit: tick at once."""
        self._notified.set()
        self._wake.set()

    def _timeout_pass(self) -> None:
        from .api import expire_timed_out
        from .updates import purge_expired_updates

        expire_timed_out()
        purge_expired_updates(using=self.using)

    def _publish(self, result: PassResult) -> None:
        self.last_passes[result.name] = result
        if self.on_pass is not None:
            self.on_pass(result)

    # -- LISTEN/NOTIFY, and its SQLite stand-in -------------------------------------------

    # -- status and shutdown ------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "engine_id": self.engine.engine_id,
            "held_claims": len(self.engine.claims.held),
            "running_turns": self.engine.in_flight,
            "queued_turns": len(self._queued),
            "turns_done": self.turns_done,
            "passes": {
                name: {"seconds": round(p.seconds, 4), "counts": dict(p.counts)}
                for name, p in self.last_passes.items()
            },
        }

    def _log_status(self) -> None:
        logger.info("status %s", self.status())

    def _shutdown(self) -> None:
        self.stop()
        if not self.engine.started:
            return  # the boot gates refused: no thread was started, nothing written
        self._safely("dispose", self.engine.dispose)  # status: disposing
        if self._pool is not None:
            deadline = time.monotonic() + self.shutdown_grace
            self._pool.close(self.concurrency)  # queued turns never start
            while self.engine.in_flight and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.engine.in_flight:
                logger.warning(
                    "%d turn(s) still running after %gs; abandoning them",
                    self.engine.in_flight,
                    self.shutdown_grace,
                )
        join_until = time.monotonic() + max(self.settings.renew_interval, 2.0)
        for thread in self._threads:
            thread.join(timeout=max(join_until - time.monotonic(), 0.01))
        recycle_connections()
        released = self._safely("shutdown", self.engine.shutdown) or 0
        logger.info("weft worker %s stopped; released %d claim(s)", self.engine.engine_id, released)
        close_connections()
