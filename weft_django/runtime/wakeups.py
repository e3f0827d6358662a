"""Wake-ups across processes: how a worker notices at once that another process
committed work for it.

Every write that makes a run runnable (start, signal, update, child
completion) also leaves a durable wake hint on the run row, which the
owner's fast tick finds within ``TICK_INTERVAL``. The two halves here only
shorten that:

* sending: :func:`notify` queues a PostgreSQL ``NOTIFY weft_wake, <run id>``
  for when the current transaction commits;
* receiving: :func:`listen` (PostgreSQL ``LISTEN``, on a connection of its
  own) and :func:`watch_sqlite` (SQLite has no NOTIFY: it watches
  ``PRAGMA data_version``, which changes whenever another connection, in any
  process, commits to the database file) call ``on_wake()`` for a change, at
  most once per :data:`MIN_WAKE_GAP`: a flood of notifications or commits
  (any role that can connect may ``NOTIFY weft_wake``) costs a worker at most
  one look per gap; the first after a quiet spell wakes it at once, and one
  arriving inside the gap is delivered as the gap ends, never dropped.

``WEFT["NOTIFY"] = False`` turns all of it off.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from django.db import connections, transaction

from ..conf import WeftSettings, get_settings
from ..models import TERMINAL_STATUSES, WorkflowRun, db_for
from ..ownership import db_now

logger = logging.getLogger("weft_django.worker")

CHANNEL = "weft_wake"
#: Seconds between two wake-ups of one listener or change watch, however many
#: notifications or commits arrive in between (docs/operations.md, "Wake-ups").
MIN_WAKE_GAP = 0.025
LISTEN_CONNECTION_DEFAULTS = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


def notify_enabled(using: str | None = None) -> bool:
    return connections[db_for(using)].vendor == "postgresql" and get_settings().notify


def notify(run_id: str, *, using: str | None = None) -> None:
    """Send ``NOTIFY weft_wake, run_id`` once the current transaction commits.

    One ``NOTIFY`` per transaction: a listener wakes its worker's tick, which
    finds every runnable run by its durable hint, so the run ids of a
    transaction that starts or wakes many runs share the first one's
    notification (a burst of 1,000 starts sends one, not 1,000)."""
    using = db_for(using)
    if not notify_enabled(using):
        return
    queued = _queued_notify(connections[using])
    if queued is not None:
        queued.run_ids.append(run_id)
        return
    transaction.on_commit(_Notify(using, run_id), using=using, robust=True)


def fold_notify(using: str) -> bool:
    """Whether a write about to be made on ``using`` should send the wake-up in
    its own statement (``pg_notify`` in it): with ``NOTIFY`` on PostgreSQL,
    outside a transaction (the statement commits alone), or inside one that has
    none queued yet. The caller calls :func:`notified` once its statement
    has sent one, so the rest of the transaction's writes send none."""
    if not notify_enabled(using):
        return False
    connection = connections[using]
    return not connection.in_atomic_block or _queued_notify(connection) is None


def notified(using: str) -> None:
    """A statement of the current transaction has sent its ``NOTIFY``: later
    :func:`notify` calls of the transaction join it (nothing more is sent on
    commit). A savepoint rolled back takes this mark with its ``NOTIFY``."""
    connection = connections[using]
    if connection.in_atomic_block:
        transaction.on_commit(_Notify(using, "", sent=True), using=using, robust=True)


class _Notify:
    """The on-commit hook that sends a transaction's ``NOTIFY`` (``sent``: the
    mark of one a statement of the transaction already sent)."""

    def __init__(self, using: str, run_id: str, *, sent: bool = False) -> None:
        self.using = using
        self.run_ids = [run_id]
        self.sent = sent

    def __call__(self) -> None:
        if self.sent:
            return
        with connections[self.using].cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, self.run_ids[0][:7000]])


def _queued_notify(connection: Any) -> _Notify | None:
    """This transaction's pending ``NOTIFY`` hook, when one is queued that commits
    whenever a write made now commits: registered outside every savepoint still
    open, or in one of them (a savepoint rolled back drops its hooks; a hook of a
    released one is not reused, to stay on the safe side). Reads Django's
    connection internals ``run_on_commit`` and ``savepoint_ids``; without them,
    None (a hook per call)."""
    if not connection.in_atomic_block:
        return None
    hooks = getattr(connection, "run_on_commit", None)
    open_savepoints = getattr(connection, "savepoint_ids", None)
    if not hooks or open_savepoints is None:
        return None
    open_ids = set(open_savepoints)
    for entry in reversed(hooks):
        sids, func = entry[0], entry[1]
        if isinstance(func, _Notify) and func.using == connection.alias and set(sids) <= open_ids:
            return func
    return None


def hint(run_ids: list[str], *, using: str | None = None) -> int:
    """Leave a durable wake hint on the non-terminal runs among ``run_ids`` and
    ``NOTIFY`` their owners (one UPDATE, then one ``NOTIFY`` on commit).
    Returns how many runs were hinted."""
    using = db_for(using)
    if not run_ids:
        return 0
    with transaction.atomic(using=using):
        # A value read from the database clock, stored as Django stores datetimes
        # (the owner clears the hint by comparing with what it read).
        hinted = (
            WorkflowRun.objects.using(using)
            .filter(pk__in=run_ids)
            .exclude(status__in=TERMINAL_STATUSES)
            .update(wake_hint_at=db_now(using))
        )
        for run_id in run_ids:
            notify(run_id, using=using)
    return hinted


def listen(
    using: str,
    stop: threading.Event,
    on_wake: Callable[[], None],
    *,
    min_gap: float = MIN_WAKE_GAP,
) -> None:
    """PostgreSQL: ``on_wake()`` for notifications, at most once per ``min_gap``
    seconds (the first after a quiet spell at once, the others of a burst
    together as the gap ends); a stop is seen within 0.25 s.

    Also one ``on_wake()`` as soon as each ``LISTEN`` is in place (the first and
    every reconnect): a notification sent while nobody listened (before the
    first ``LISTEN``, or while the connection was down) is lost by the server,
    and that wake-up makes the worker look for what it announced at once
    instead of at its next tick.
    """
    import psycopg  # only PostgreSQL deployments have the driver

    params = connections[using].get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params["autocommit"] = True
    # A listener must notice a dead server or network and reconnect, not sit on a
    # half-open socket: bounded connects, TCP keepalives (unless configured).
    for key, value in LISTEN_CONNECTION_DEFAULTS.items():
        params.setdefault(key, value)
    while not stop.is_set():
        try:
            with psycopg.connect(**params) as conn:
                conn.execute(f"LISTEN {CHANNEL}")
                on_wake()  # catch up with what was announced before this LISTEN
                signalled, pending = time.monotonic(), False
                while not stop.is_set():
                    # While a wake-up is pending, wait no longer than its gap.
                    wait = max(signalled + min_gap - time.monotonic(), 0.0) if pending else 0.25
                    for _note in conn.notifies(timeout=wait):
                        pending = True
                        if time.monotonic() - signalled >= min_gap:
                            break
                    if pending and time.monotonic() - signalled >= min_gap:
                        signalled, pending = time.monotonic(), False
                        on_wake()
        except Exception as exc:
            logger.warning("LISTEN connection failed (%s); retrying", exc)
            stop.wait(1.0)


def wake_source(
    using: str, settings: WeftSettings, stop: threading.Event, on_wake: Callable[[], None]
) -> tuple[str, Callable[[], None]] | None:
    """The thread that wakes a worker as soon as work for it is committed, as
    (thread name, target): ``LISTEN`` on PostgreSQL with ``NOTIFY`` on, the
    change watch on file-based SQLite; None where there is neither (MySQL,
    MariaDB, an in-memory SQLite database, ``NOTIFY`` off): the fast tick alone."""
    if notify_enabled(using):
        return "weft-listen", functools.partial(listen, using, stop, on_wake)
    if can_watch_sqlite(using, settings):
        poll = min(0.01, settings.tick_interval)
        return "weft-sqlite-watch", functools.partial(watch_sqlite, using, stop, on_wake, poll=poll)
    return None


def can_watch_sqlite(using: str, settings: WeftSettings) -> bool:
    connection = connections[using]
    if connection.vendor != "sqlite" or not settings.notify:
        return False
    return not cast(Any, connection).is_in_memory_db()  # a method of SQLite's wrapper only


def watch_sqlite(
    using: str,
    stop: threading.Event,
    on_wake: Callable[[], None],
    *,
    poll: float = 0.01,
    min_gap: float = MIN_WAKE_GAP,
) -> None:
    """SQLite: one trivial read every ``poll`` seconds on a connection of its own;
    ``on_wake()`` at most once per ``min_gap`` seconds, and once as each watch
    begins (commits made before it are not seen as changes)."""
    path = str(connections[using].settings_dict["NAME"])
    while not stop.is_set():
        try:
            with contextlib.closing(sqlite3.connect(path, timeout=5, isolation_level=None)) as conn:
                last = conn.execute("PRAGMA data_version").fetchone()[0]
                on_wake()  # catch up with what was committed before the watch began
                signalled, pending = time.monotonic(), False
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
