"""Wake sources: how a worker notices, at once, that another process committed work.

Every write that makes a run runnable also leaves a durable wake hint, which
the fast tick finds within ``TICK_INTERVAL``. These loops only shorten that:

* PostgreSQL: ``LISTEN weft_wake`` on a connection of its own
  (:mod:`weft_django.notify` sends the ``NOTIFY``);
* SQLite: no NOTIFY, so watch ``PRAGMA data_version``, which changes whenever
  another connection, in any process, commits to the database file.

``WEFT["NOTIFY"] = False`` turns both off. Each loop runs until ``stop`` is
set and calls ``on_wake()`` for every change it sees.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from django.db import connections

from .conf import WeftSettings
from .notify import CHANNEL

logger = logging.getLogger("weft_django.worker")


def listen(using: str, stop: threading.Event, on_wake: Callable[[], None]) -> None:
    """PostgreSQL: ``on_wake()`` per notification; a stop is seen within 0.25 s."""
    import psycopg

    params = connections[using].get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params["autocommit"] = True
    while not stop.is_set():
        try:
            with psycopg.connect(**params) as conn:
                conn.execute(f"LISTEN {CHANNEL}")
                while not stop.is_set():
                    for _note in conn.notifies(timeout=0.25):
                        on_wake()
        except Exception as exc:
            logger.warning("LISTEN connection failed (%s); retrying", exc)
            stop.wait(1.0)


def can_watch_sqlite(using: str, settings: WeftSettings) -> bool:
    connection = connections[using]
    return connection.vendor == "sqlite" and settings.notify and not connection.is_in_memory_db()


def watch_sqlite(
    using: str,
    stop: threading.Event,
    on_wake: Callable[[], None],
    *,
    poll: float = 0.01,
    min_gap: float = 0.025,
) -> None:
    """SQLite: one trivial read every ``poll`` seconds on a connection of its own;
    ``on_wake()`` at most once per ``min_gap`` seconds."""
    import sqlite3

    path = str(connections[using].settings_dict["NAME"])
    while not stop.is_set():
        try:
            with contextlib.closing(sqlite3.connect(path, timeout=5, isolation_level=None)) as conn:
                last = conn.execute("PRAGMA data_version").fetchone()[0]
                signalled, pending = 0.0, False
                while not stop.wait(poll):
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if version != last:
                        last, pending = version, True
                    if pending and time.monotonic() - signalled >= min_gap:
                        signalled, pending = time.monotonic(), False
                        on_wake()
        except Exception as exc:
            logger.warning("SQLite change watch failed (%s); retrying", exc)
            stop.wait(1.0)
