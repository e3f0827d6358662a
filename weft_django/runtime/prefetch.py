"""The reads of new runs' first turns, for a whole intake batch in one statement.

A first turn of a pending run starts from its row, and, when it waits, asks
whether a signal is buffered for it and whether update requests are pending.
For a batch of runs the engine has just claimed, :class:`FirstTurnReads`
reads all of that in one statement (the run fields plus two ``EXISTS``) and
keeps each row until its turn takes it, so such a turn makes no read of its
own: a first turn that parks is its one fenced write.

Why a row read before the turn is safe: a pending run's fields do not change
while it waits for its first turn, except through writes that rotate its
claim's epoch (cancel, suspend, purge: the turn's first fenced write is then
refused) or that leave a wake hint on the run (a signal or an update request
stored after the read: the hint survives the park, so the run is woken for
it, as with the plain-read probe it replaces). A row is used at most once,
only while the run is still pending as read, and not after
:data:`PREFETCH_TTL` seconds; a turn without one reads for itself.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper

from ..models import RunStatus, UpdateRequest, UpdateStatus, WorkflowRun, WorkflowSignal
from ..ownership import NOW_SQL, as_aware
from .runs import RUN_FIELDS

#: Seconds a prefetched row stays usable (a turn that waited longer reads again).
PREFETCH_TTL = 30.0
#: The run-dict keys that carry what the read saw (False: nothing there then).
SIGNALS_BUFFERED = "signals_buffered"
UPDATES_PENDING = "updates_pending"
#: The database clock at the read, and this process's monotonic clock then: the
#: turn's clock starts there (:meth:`~.writes.RunWrites.now`), no read of its own.
CLOCK_READ = "clock_read"


def read_first_turns(run_ids: Collection[str], *, using: str) -> list[dict[str, Any]]:
    """The :data:`~.runs.RUN_FIELDS` of the pending runs among ``run_ids``, each
    with whether a signal is buffered for it and whether update requests are
    pending, and the database clock, in one statement.

    Written as SQL, not built by the ORM: it runs once per intake batch on the
    thread that claims new work, and building and compiling the equivalent
    queryset costs several times the CPU of this whole read (docs/benchmarks.md,
    "Prefetch cost"). The values are converted as the ORM's
    ``values()`` gives them: JSON decoded by its model field, timestamps aware
    in UTC (:func:`~weft_django.ownership.clock.as_aware`, as every timestamp
    weft reads raw), flags as ``bool``.
    """
    if not run_ids:
        return []
    connection = connections[using]
    ids = list(run_ids)
    with connection.cursor() as cursor:
        cursor.execute(
            _first_turns_sql(using, connection.vendor, len(ids)),
            [UpdateStatus.PENDING, *ids, RunStatus.PENDING],
        )
        rows = cursor.fetchall()
    convert = _converters(connection)
    names = (*RUN_FIELDS, SIGNALS_BUFFERED, UPDATES_PENDING, "db_now")
    return [
        {name: convert[name](value) for name, value in zip(names, row, strict=True)} for row in rows
    ]


@functools.lru_cache(maxsize=256)
def _first_turns_sql(using: str, vendor: str, count: int) -> str:
    """The statement for ``count`` run ids (made once per database and count)."""
    quote = connections[using].ops.quote_name

    def table(model: type[models.Model]) -> str:
        return quote(model._meta.db_table)

    def column(model: type[models.Model], name: str) -> str:
        field: Any = model._meta.get_field(name)  # a concrete field: it has a column
        return quote(field.column)

    run_id = column(WorkflowRun, "id")
    fields = ", ".join(f"r.{column(WorkflowRun, name)}" for name in RUN_FIELDS)
    signal_run = column(WorkflowSignal, "run")
    update_run = column(UpdateRequest, "run")
    now = NOW_SQL.get(vendor, "CURRENT_TIMESTAMP").replace("%", "%%")
    return (
        f"SELECT {fields}, "
        f"EXISTS (SELECT 1 FROM {table(WorkflowSignal)} s WHERE s.{signal_run} = r.{run_id} "
        f"AND s.{column(WorkflowSignal, 'consumed_at')} IS NULL), "
        f"EXISTS (SELECT 1 FROM {table(UpdateRequest)} u WHERE u.{update_run} = r.{run_id} "
        f"AND u.{column(UpdateRequest, 'status')} = %s), "
        f"{now} "
        f"FROM {table(WorkflowRun)} r WHERE r.{run_id} IN ({', '.join(['%s'] * count)}) "
        f"AND r.{column(WorkflowRun, 'status')} = %s"
    )


def _converters(connection: BaseDatabaseWrapper) -> dict[str, Callable[[Any], Any]]:
    """Per column of :func:`read_first_turns`, its value as the ORM gives it."""

    def same(value: Any) -> Any:
        return value

    def aware(value: datetime | str | None) -> datetime | None:
        return None if value is None else as_aware(value)

    def decoder(name: str) -> Callable[[Any], Any]:
        field: Any = WorkflowRun._meta.get_field(name)  # a JSONField
        return lambda value: field.from_db_value(value, None, connection)

    convert: dict[str, Callable[[Any], Any]] = dict.fromkeys(RUN_FIELDS, same)
    for name in RUN_FIELDS:
        internal_type = WorkflowRun._meta.get_field(name).get_internal_type()
        if internal_type == "JSONField":
            convert[name] = decoder(name)
        elif internal_type == "DateTimeField":
            convert[name] = aware
    convert[SIGNALS_BUFFERED] = convert[UPDATES_PENDING] = bool
    convert["db_now"] = same  # as_aware() in FirstTurnReads.load
    return convert


class FirstTurnReads:
    """Prefetched first-turn rows of one engine, each taken at most once."""

    def __init__(self, using: str, ttl: float = PREFETCH_TTL) -> None:
        self.using = using
        self.ttl = ttl
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[float, dict[str, Any]]] = {}

    def load(self, run_ids: Collection[str]) -> int:
        """Read the first turns of ``run_ids`` (runs this engine has just
        claimed); returns how many pending rows were kept."""
        rows = read_first_turns(run_ids, using=self.using)
        read_at = time.monotonic()
        with self._lock:
            self._expire(read_at)
            for row in rows:
                row[CLOCK_READ] = (as_aware(row.pop("db_now")), read_at)
                self._rows[row["id"]] = (read_at, row)
        return len(rows)

    def take(self, run_id: str) -> dict[str, Any] | None:
        """The row read for ``run_id``'s first turn, once; None when there is
        none, or it is older than the TTL."""
        with self._lock:
            entry = self._rows.pop(run_id, None)
        if entry is None or time.monotonic() - entry[0] > self.ttl:
            return None
        return entry[1]

    def peek(self, run_ids: Collection[str]) -> list[dict[str, Any]]:
        """The rows kept for ``run_ids`` (left for their turns to take)."""
        with self._lock:
            return [entry[1] for run_id in run_ids if (entry := self._rows.get(run_id))]

    def discard(self, run_id: str) -> None:
        with self._lock:
            self._rows.pop(run_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)

    def _expire(self, now: float) -> None:
        stale = [key for key, (read_at, _) in self._rows.items() if now - read_at > self.ttl]
        for key in stale:
            del self._rows[key]
