"""A turn's admission under its queue's limits (docs/flow-control.md).

Before a turn of a run whose queue has limits executes anything, the engine
asks :func:`admit`: the queue's slot, the key's slot and the rate tokens are
taken all or none (one statement on PostgreSQL, :mod:`.admission`; one
transaction elsewhere). The first turns of a batch of new runs are admitted
at pickup instead, where they can be (:func:`admit_ahead`). Refused, the run
is deferred durably by :func:`defer` (a fenced write): a pending run's
``start_at`` (and ``wake_at``) move to the time it may try again, a started
run's ``wake_at`` does (its wake hint, if any, is folded into that timer, as
a park does); the engine keeps the claim and the fast tick finds the run
again at that time. No thread waits and nothing polls in between:

* refused by the **rate**: it comes back exactly when the window opens;
* refused for a **slot**: it comes back after :data:`SLOT_RETRY` (a small
  randomised backoff), and the intake meanwhile claims no run of a queue
  (or key) whose slots are all held (:func:`~.budget.claimable`).

The turn's slots are freed by its last write (its park or its finish: in
the same statement on PostgreSQL, the same transaction elsewhere;
``RunWrites.holds_slots``); a turn cut off before that (deposed, stopped, a
database error) has them freed by :func:`release` right after: one UPDATE by
run, engine and epoch. Should that fail too, the slot stays with the claim
(never with anyone else) and is taken again by the run's next turn at that
epoch, or freed by a takeover or a release of the claim, whichever comes
first.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import DatabaseError, connections, transaction
from django.db.models import Case, DateTimeField, F, Value, When

from ..exceptions import EngineDeposedError
from ..models import RunStatus, WorkflowRun
from .admission import admit_in_one_statement, admit_in_order
from .metrics import throttled
from .rate import take_token
from .settings import QueueLimits, limits_of
from .slots import release_slots, take_slots

logger = logging.getLogger("weft_django.flow")

#: Seconds a run refused a slot waits before it tries again (randomised +-50 %).
SLOT_RETRY = 0.5


class _Refused(Exception):
    def __init__(self, until: datetime, why: str) -> None:
        super().__init__(why)
        self.until = until
        self.why = why


def limits_for(run: dict[str, Any]) -> QueueLimits | None:
    """The limits a turn of ``run`` obeys (None: none, the fast path)."""
    return limits_of(run.get("queue") or "default")


def admit(
    using: str,
    limits: QueueLimits,
    run: dict[str, Any],
    *,
    engine_id: str,
    epoch: int,
    now: datetime,
) -> tuple[datetime, str] | None:
    """Take the turn's slots and rate tokens: None when admitted, else (the
    time to try again, ``"slot"`` or ``"rate"``); nothing is taken then.

    On PostgreSQL one statement settles the common cases
    (:mod:`.admission`); the general path below settles the rest, and is
    the only one elsewhere."""
    key = run.get("concurrency_key") or ""
    queue = limits.name
    turn = {"run_id": run["id"], "engine_id": engine_id, "epoch": epoch, "now": now}
    retry = now + timedelta(seconds=SLOT_RETRY * random.uniform(0.5, 1.5))
    groups = limits.groups(key)
    cells = limits.cells(key)
    if connections[using].vendor == "postgresql":
        verdict = admit_in_one_statement(using, queue, groups, cells, **turn)
        if verdict.admitted:
            return None
        if not verdict.general:
            return (retry, "slot") if verdict.why == "slot" else (verdict.opens or now, "rate")
    try:
        with transaction.atomic(using=using):
            if groups and not take_slots(using, queue, groups, **turn):
                raise _Refused(retry, "slot")
            for cell_key, rate, burst in cells:
                opens = take_token(using, queue, cell_key, rate, burst, now)
                if opens is not None:
                    raise _Refused(opens, "rate")
    except _Refused as refused:
        return refused.until, refused.why
    return None


#: The key a first turn's prefetched row carries when its slot and token were
#: taken at pickup (:func:`admit_ahead`): the claim epoch they were taken at.
ADMITTED = "flow_admitted"


def admit_ahead(
    using: str,
    rows: list[dict[str, Any]],
    epoch_of: Callable[[str], int | None],
    *,
    engine_id: str,
    now: Callable[[], datetime],
) -> int:
    """Admit the first turns of runs this engine has just claimed (their
    prefetched ``rows``), one statement (PostgreSQL) or transaction
    (MariaDB/MySQL) per limited queue (:func:`~.admission.admit_in_order`), so
    that those turns skip their own admission. Each row admitted is marked
    with :data:`ADMITTED` (its epoch); how many were. Runs with per-key
    limits, and every run on SQLite, are admitted by their turn, as are those
    of a queue whose statement fails (logged). ``now`` is called once, when a
    run is limited."""
    by_queue: dict[str, tuple[QueueLimits, list[tuple[dict[str, Any], int]]]] = {}
    for row in rows:
        limits = limits_for(row)
        key = row.get("concurrency_key") or ""
        if limits is None or len(limits.groups(key)) > 1 or len(limits.cells(key)) > 1:
            continue
        epoch = epoch_of(row["id"])
        if epoch is not None:
            by_queue.setdefault(limits.name, (limits, []))[1].append((row, epoch))
    if not by_queue:
        return 0
    admitted = 0
    at = now()  # read only when a run is limited
    for queue, (limits, queued) in by_queue.items():
        cells = limits.cells("")
        try:
            count = admit_in_order(
                using,
                queue,
                limits.concurrency,
                cells[0] if cells else None,
                [(row["id"], epoch) for row, epoch in queued],
                engine_id=engine_id,
                now=at,
            )
        except DatabaseError as exc:  # each of these turns is admitted for itself
            logger.debug("could not admit %d runs of %s at pickup: %s", len(queued), queue, exc)
            continue
        for row, epoch in queued[:count]:
            row[ADMITTED] = epoch
        admitted += count
    return admitted


class Host(Protocol):
    """What the gate needs of the engine driving the turn."""

    using: str
    engine_id: str
    ownership: Any


def admit_or_defer(
    host: Host, run: dict[str, Any], epoch: int, limits: QueueLimits, now: datetime
) -> str | None:
    """Admit the turn (None), or defer the run durably in a fenced write: the
    turn's outcome, ``"throttled"`` (or ``"deposed"``: the fence did not hold)."""
    refused = admit(host.using, limits, run, engine_id=host.engine_id, epoch=epoch, now=now)
    if refused is None:
        return None
    until, why = refused
    try:
        with host.ownership.fenced(host.ownership.fence_for(run["id"], epoch)):
            defer(run, until, using=host.using)
    except EngineDeposedError:
        host.ownership.forget(run["id"], epoch)
        return "deposed"
    throttled.labels(queue=limits.name, reason=why).inc()
    return "throttled"


def defer(run: dict[str, Any], until: datetime, *, using: str) -> int:
    """Move a refused run's due time to ``until`` (call inside the fenced
    transaction of its turn): a pending run's ``start_at`` and ``wake_at``, a
    started run's ``wake_at`` (never past its execution deadline), clearing
    the wake hint the turn read (a later one survives). Rows written (0: the
    run moved on meanwhile)."""
    runs = WorkflowRun.objects.using(using).filter(pk=run["id"])
    if run["status"] == RunStatus.PENDING:
        return runs.filter(status=RunStatus.PENDING).update(start_at=until, wake_at=until)
    deadline = run.get("timeout_at")
    wake = until if deadline is None or until < deadline else deadline
    values: dict[str, Any] = {"wake_at": wake}
    seen = run.get("wake_hint_at")
    if seen is not None:
        values["wake_hint_at"] = Case(
            When(wake_hint_at=seen, then=Value(None)),
            default=F("wake_hint_at"),
            output_field=DateTimeField(),
        )
    return runs.exclude(status=RunStatus.PENDING).update(**values)


def release(using: str, run_id: str, engine_id: str, epoch: int) -> None:
    """Free the slots the turn held (best effort: see the module docstring)."""
    try:
        release_slots(using, run_id, engine_id, epoch)
    except DatabaseError as exc:
        logger.warning("could not free the slots of %s (freed by its next turn): %s", run_id, exc)
