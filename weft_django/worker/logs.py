"""What a worker tells its operator: a default log handler, and its counters.

``manage.py weft_worker`` in a project whose ``LOGGING`` gives the
``weft_django`` loggers no handler (a fresh ``startproject``) would print only
what Python's last-resort handler shows, warnings and errors without a time
or a logger name. :func:`ensure_handler` gives those loggers a stderr handler
of their own then, and never touches a logging setup the project made
(docs/operations.md, "Logging").

:class:`TurnCounts` keeps what happened since the last status line (turns,
failures, suspensions, reclaims, takeovers); :func:`summarize` shortens a
list of run ids for one log line. :func:`log_started` is a worker's first
line, :func:`log_status` its periodic one.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections import Counter
from collections.abc import Iterable

from django.db import connections

from ..conf import Timing
from ..runtime import registry

#: The format of the handler :func:`ensure_handler` adds.
DEFAULT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The loggers of this package share this root.
ROOT = "weft_django"
#: Lists of run ids longer than this are summarized in log lines.
MAX_LISTED = 10


def has_handler(name: str = ROOT) -> bool:
    """Whether a record of logger ``name`` reaches a handler the project configured
    (on it, on a logger below it, or on an ancestor it propagates to): anything
    but Python's ``logging.lastResort``."""
    logger: logging.Logger | None = logging.getLogger(name)
    while logger is not None:
        if logger.handlers:
            return True
        if not logger.propagate:
            return False
        logger = logger.parent
    prefix = f"{name}."
    return any(
        other.startswith(prefix) and isinstance(candidate, logging.Logger) and candidate.handlers
        for other, candidate in list(logging.Logger.manager.loggerDict.items())
    )


def ensure_handler(level: str | None = None) -> logging.Handler | None:
    """The command's logging: with no handler configured for ``weft_django``, add a
    stderr handler (time, level, logger, message) at ``level`` (default INFO) and
    return it. With one configured, leave the setup alone, except the
    ``weft_django`` logger's level when ``level`` is given. Returns the handler
    added, or None."""
    logger = logging.getLogger(ROOT)
    if has_handler(ROOT):
        if level:
            logger.setLevel(level)
        return None
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(DEFAULT_FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level or logging.INFO)
    return handler


def summarize(run_ids: Iterable[str], limit: int = MAX_LISTED) -> str:
    """``a, b, c``; past ``limit`` ids, the first ``limit`` and how many more."""
    ids = list(run_ids)
    if len(ids) <= limit:
        return ", ".join(ids)
    return f"{', '.join(ids[:limit])} and {len(ids) - limit} more"


class TurnCounts:
    """Counts since the last status line, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, what: str, count: int = 1) -> None:
        if count:
            with self._lock:
                self._counts[what] += count

    def take(self) -> Counter[str]:
        """The counts so far; they start again from zero."""
        with self._lock:
            counts, self._counts = self._counts, Counter()
        return counts


#: What the status line counts since the last one, in its order (turn outcomes,
#: then the runs the reclaim pass took and the claims taken over from expired
#: engines).
STATUS_COUNTS = (
    "completed",
    "parked",
    "failed",
    "suspended",
    "timed_out",
    "halted",
    "reclaimed",
    "taken_over",
)
#: Counts that are not turns.
NOT_TURNS = ("reclaimed", "taken_over")

logger = logging.getLogger("weft_django.worker")


def log_status(held: int, running: int, queued: int, counts: Counter[str]) -> None:
    """The status line: what is held and running now, what happened since the last."""
    turns = sum(n for what, n in counts.items() if what not in NOT_TURNS)
    since = " ".join(f"{what}={counts[what]}" for what in STATUS_COUNTS)
    logger.info(
        "status: held=%d running=%d queued=%d; since the last status line: turns=%d %s",
        held,
        running,
        queued,
        turns,
        since,
    )


def log_started(
    engine_id: str, mode: str, using: str, timing: Timing, *, tick: float, concurrency: int
) -> None:
    """A worker's first line: who, where, with which timings and workflows."""
    connection = connections[using]
    logger.info(
        "weft worker %s started: host=%s pid=%d mode=%s database=%s:%s ttl=%gs "
        "renew=%gs tick=%gs concurrency=%d workflows=%s",
        engine_id,
        socket.gethostname(),
        os.getpid(),
        mode,
        connection.vendor,
        connection.settings_dict.get("NAME"),
        timing.ttl,
        timing.renew_interval,
        tick,
        concurrency,
        registry.served_summary(),
    )
