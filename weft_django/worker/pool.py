"""The worker's executor threads and how they keep their database connections."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created


class TurnPool:
    """The executor threads' queue: at most one queued or running turn per run.

    ``drive(run_id)`` runs one turn and says whether the run should be retried
    (the turn was abandoned); retried runs wait in :meth:`take_retries` for the
    host's next tick. Not a ``ThreadPoolExecutor``: its threads are the worker's
    own (supervised), so each closes its database connection when it ends and
    the connection it keeps between turns is never left to the garbage collector.
    """

    def __init__(
        self,
        drive: Callable[[str], bool],
        *,
        stopped: Callable[[], bool] = lambda: False,
        on_done: Callable[[], None] = lambda: None,
    ) -> None:
        self._drive = drive
        self._stopped = stopped
        self._on_done = on_done
        # Two deques under a condition rather than a queue.Queue: a wake-up
        # (``urgent``) is taken before any new work, so it never waits behind a
        # backlog, and a thread serving only wake-ups (``serve(urgent_only=True)``)
        # takes it even while every other thread is busy with a long turn.
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._urgent: deque[str] = deque()
        self._items: deque[str] = deque()
        self._closed = False
        self._queued: set[str] = set()
        self._retry: set[str] = set()
        self.turns_done = 0

    def submit(self, run_id: str, *, urgent: bool = False) -> bool:
        """Queue one turn of ``run_id`` unless one is queued or running already;
        ``urgent`` (a wake-up): ahead of everything queued."""
        with self._ready:
            if self._closed or run_id in self._queued:
                return False
            self._queued.add(run_id)
            (self._urgent if urgent else self._items).append(run_id)
            # Every waiter: a thread serving only wake-ups must not swallow the
            # notification of new work (nor the reverse).
            self._ready.notify_all()
        return True

    def _take(self, *, block: bool, urgent_only: bool = False) -> str | None:
        """The next run to serve: wake-ups first; None once closed and drained."""
        with self._ready:
            while True:
                if self._urgent:
                    return self._urgent.popleft()
                if self._items and not urgent_only:
                    return self._items.popleft()
                if self._closed:
                    return None
                if not block:
                    raise queue.Empty
                self._ready.wait()

    def retry_later(self, run_id: str) -> None:
        with self._lock:
            self._retry.add(run_id)

    def take_retries(self) -> set[str]:
        with self._lock:
            retry, self._retry = self._retry, set()
            return retry

    def is_queued(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._queued

    def queued_ids(self) -> frozenset[str]:
        """The runs queued or being driven now (a snapshot)."""
        with self._lock:
            return frozenset(self._queued)

    def queued(self) -> int:
        with self._lock:
            return len(self._queued)

    def idle(self) -> bool:
        """Nothing queued, running or waiting to be retried."""
        with self._lock:
            return not self._queued and not self._retry

    def serve(self, *, urgent_only: bool = False) -> None:
        """Serve turns until closed; ``urgent_only``: wake-ups only (the thread
        kept for them)."""
        while True:
            run_id = self._take(block=True, urgent_only=urgent_only)
            if run_id is None:
                return
            self._serve_one(run_id)

    def run_pending(self) -> int:
        """Run what is queued now on the calling thread, then return how many ran
        (for a host without executor threads, e.g. a test or a one-shot task)."""
        ran = 0
        while True:
            try:
                run_id = self._take(block=False)
            except queue.Empty:
                return ran
            if run_id is None:
                return ran
            self._serve_one(run_id)
            ran += 1

    def _serve_one(self, run_id: str) -> None:
        retry = False
        try:
            if not self._stopped():  # queued before a stop: not started, not retried
                retry = self._drive(run_id)
        finally:
            with self._lock:
                self._queued.discard(run_id)
                if retry and not self._stopped():
                    self._retry.add(run_id)
                self.turns_done += 1
            self._on_done()

    def close(self) -> None:
        """No more submissions; each thread ends once what is queued is drained
        (a stopped host's queued turns are skipped, not started)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()


def recycle_connections() -> None:
    """``close_old_connections()`` for the worker's long-lived threads.

    Around each unit of work (docs/operations.md) it drops connections that are
    broken or, with a positive ``CONN_MAX_AGE``, too old, like Django's own.
    Unlike it, ``CONN_MAX_AGE = 0`` (Django's default, meaning "close at the
    end of each request") does not close the connection after every turn: a
    worker thread is not a request, and reconnecting per turn would add a
    connection's set-up to every step. Connections inside an atomic block belong to a
    caller's transaction (e.g. a test calling ``Worker.run()``) and are left
    alone.
    """
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block:
            continue
        if conn.settings_dict.get("CONN_MAX_AGE") == 0:
            conn.close_at = None
        conn.close_if_unusable_or_obsolete()


def close_connections() -> None:
    """Close this thread's connections (not one inside a caller's transaction)."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


# How each database ends a session left idle inside a transaction; MySQL 8 has no
# such setting (only ``wait_timeout``, for sessions idle outside transactions).
IDLE_IN_TRANSACTION = {
    "postgresql": lambda seconds: (
        "SET idle_in_transaction_session_timeout = %s",
        [f"{int(seconds * 1000)}ms"],
    ),
    "mariadb": lambda seconds: (
        "SET SESSION idle_transaction_timeout = %s",
        [max(1, round(seconds))],
    ),
}


def end_idle_transactions(using: str, seconds: float) -> Callable[[], None]:
    """Have the server end any session of this process that sits idle inside a
    transaction for longer than ``seconds`` (PostgreSQL, MariaDB).

    A worker frozen inside a transaction (SIGSTOP, a GC pause, a stalled VM)
    keeps the row locks of that transaction; this bounds how long, so its runs
    can be taken over. Applied to every connection of ``using`` this process
    opens from now on, and to the calling thread's open one. Returns the undo.
    """

    def configure(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
        flavour = "mariadb" if getattr(connection, "mysql_is_mariadb", False) else connection.vendor
        if connection.alias == using and flavour in IDLE_IN_TRANSACTION:
            statement, params = IDLE_IN_TRANSACTION[flavour](seconds)
            with connection.cursor() as cursor:
                cursor.execute(statement, params)

    uid = f"weft-idle-in-transaction-{using}"
    connection_created.connect(configure, dispatch_uid=uid, weak=False)
    current = connections[using]
    if current.connection is not None:
        configure(None, current)

    def undo() -> None:
        connection_created.disconnect(dispatch_uid=uid)

    return undo
