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

import threading
import time
from collections.abc import Collection
from typing import Any

from django.db.models import Exists, OuterRef

from ..models import RunStatus, UpdateRequest, UpdateStatus, WorkflowRun, WorkflowSignal
from ..ownership.clock import DbNow, as_aware
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
    pending, and the database clock, in one statement."""
    if not run_ids:
        return []
    signals = WorkflowSignal.objects.using(using).filter(
        run_id=OuterRef("pk"), consumed_at__isnull=True
    )
    updates = UpdateRequest.objects.using(using).filter(
        run_id=OuterRef("pk"), status=UpdateStatus.PENDING
    )
    return list(
        WorkflowRun.objects.using(using)
        .filter(pk__in=list(run_ids), status=RunStatus.PENDING)
        .annotate(
            **{SIGNALS_BUFFERED: Exists(signals), UPDATES_PENDING: Exists(updates)},
            db_now=DbNow(),
        )
        .values(*RUN_FIELDS, SIGNALS_BUFFERED, UPDATES_PENDING, "db_now")
    )


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
