"""The worker's executor threads and how they keep their database connections."""

from __future__ import annotations

import queue
from collections.abc import Callable

from django.db import connections


class TurnPool:
    """The executor threads' queue: run ids in, one ``drive_unit`` call each.

    Not a ``ThreadPoolExecutor``: its threads are the worker's own (started with
    ``_spawn``), so each closes its database connection when it ends, and the
    connection it keeps between turns is never left to the garbage collector.
    """

    def __init__(self, drive_unit: Callable[[str], None]) -> None:
        self._drive_unit = drive_unit
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._closed = False

    def submit(self, run_id: str) -> bool:
        if self._closed:
            return False
        self._queue.put(run_id)
        return True

    def serve(self) -> None:
        while True:
            run_id = self._queue.get()
            if run_id is None:
                return
            self._drive_unit(run_id)

    def close(self, threads: int) -> None:
        """No more submissions; each thread ends after the item in front of its stop."""
        self._closed = True
        for _thread in range(threads):
            self._queue.put(None)


def recycle_connections() -> None:
    """``close_old_connections()`` for the worker's long-lived threads.

    Around each unit of work (docs/operations.md) it drops connections that are
    broken or, with a positive ``CONN_MAX_AGE``, too old, like Django's own.
    Unlike it, ``CONN_MAX_AGE = 0`` (Django's default, meaning "close at the
    end of each request") does not close the connection after every turn: a
    worker thread is not a request, and reconnecting per turn cost ~1.4 ms
    per step on PostgreSQL. Connections inside an atomic block belong to a
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
