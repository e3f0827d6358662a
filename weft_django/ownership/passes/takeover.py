"""Batched takeover for the reclaim scan (docs/ownership.md, "Takeover at scale").

The reclaim scan takes stranded runs in batches, by the same rules as the
one-run transitions of :mod:`.claims`, so a worker can hold again the
100,000 parked runs a crashed or departed worker left behind within a few
renew intervals:

* **Expired holder** ``H`` (its lease ended before the cutoff, on the database
  clock): one transaction per batch. (a) Bump ``H``'s ``revocations`` *only if
  its lease is still expired* (the re-check and the engine row's lock in one
  UPDATE: an owner that renewed meanwhile is never deposed); (b) lock the next
  page of ``H``'s claims in ``workflow_id`` order after a keyset cursor
  (the ``(holder, workflow_id)`` index), ``FOR UPDATE SKIP LOCKED``: a claim
  row the old owner still locks inside a frozen transaction is skipped, never
  waited on; (c) read those runs by primary key, under the claim locks: only
  active runs of registered types are taken; (d) move exactly those rows in
  one conditional UPDATE (``holder = H``), epoch + 1, whose row count must
  equal the rows locked, else the whole transaction rolls back.
* **Ownerless** started runs (e.g. after a graceful shutdown): a page of the
  claims let go of before their run ended (``released_at``, a partial index,
  in id order after a keyset cursor) and their runs by key; or, in the full
  sweep (:mod:`.reclaim`), a page of all started runs in id order (the
  ``(status, id)`` index, each with its claim's holder). Then one transaction
  locks the claim rows of that page that still have no holder
  (``SKIP LOCKED``), re-reads their runs under those locks, and moves them in
  one conditional UPDATE (``holder IS NULL``), epoch + 1, row count checked
  the same way.

Every query is a one-table scan of an index in key order, or lookups by
primary key: no join whose plan depends on the table's statistics, so a
table that was just bulk-loaded and never analysed is walked the same way.
On PostgreSQL and MariaDB the rows are locked before they are read and
moved, so each new epoch is exactly the epoch read + 1 and the runs' state
read under the locks is still true after the move (every other transition
of a claim needs its row lock). SQLite has one write lock for the whole
database and no row locks: a concurrent writer makes the batch fail
("database is locked") or its row count differ, and the batch then falls
back to the one-run transitions. Claims won while the engine is disposing
are released at once.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import OperationalError, connections, transaction
from django.db.models import Exists, F, OuterRef, QuerySet, Subquery

from ...models import ACTIVE_STATUSES, Claim, Engine, RunStatus, WorkflowRun
from ..claims.registry import ClaimRegistry
from ..claims.release import release_held, unstamp_ended
from ..claims.served import admits
from ..locks import PASS_LOCK_WAIT, bounded_lock_wait, is_lock_failure

logger = logging.getLogger("weft_django.reclaim")

#: Claims moved per statement.
BATCH = 1000
#: Started statuses an ownerless run can be in (a pending run is the tick's).
STARTED = (RunStatus.RUNNING, RunStatus.WAITING)


class _Rollback(Exception):
    """Internal: undo a batch that lost its race or found nothing to move."""


@dataclass
class Batch:
    """What one batch did.

    ``won``: run id -> new epoch; ``due``: for each run won, whether it needs a
    turn now (left running or pending, a wake hint or a due timer: a parked run
    with nothing due is held without one); ``fallback``: ids to take one at a
    time (no claim row yet, or a row count that differed on SQLite);
    ``skipped``: ids in their anti-thrash cooldown; ``lost``: ids not taken
    because the engine is disposing; ``holder_id``: the expired engine a
    takeover batch took them from (None: ownerless runs).
    """

    won: dict[str, int] = field(default_factory=dict)
    due: dict[str, bool] = field(default_factory=dict)
    fallback: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    holder_live: bool = False
    busy: bool = False
    holder_id: str | None = None


def _lock_rows(query: QuerySet[Claim], using: str) -> QuerySet[Claim]:
    if connections[using].features.has_select_for_update_skip_locked:
        return query.select_for_update(skip_locked=True)
    return query


def in_index_order(using: str) -> None:
    """PostgreSQL, inside a transaction: walk the page queries' indexes in key order.

    A keyset page is "the next N rows of an index"; right after a bulk load the
    planner's statistics can claim the table is tiny and pick a bitmap scan of
    every matching row plus a sort. Turning both off (``SET LOCAL``) leaves the
    index scan in key order, which stops after N rows whatever the statistics say.
    """
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('enable_sort', 'off', true), "
                "set_config('enable_bitmapscan', 'off', true)"
            )


def _runs(using: str, run_ids: list[str], now: datetime) -> dict[str, tuple[str, str, bool, int]]:
    """Run id -> (workflow name, status, a turn is due, workflow version), by
    primary key."""
    rows = (
        WorkflowRun.objects.using(using)
        .filter(pk__in=run_ids)
        .order_by()
        .values_list("pk", "workflow_name", "status", "wake_hint_at", "wake_at", "workflow_version")
    )
    return {
        run_id: (
            name,
            status,
            status != RunStatus.WAITING
            or hint is not None
            or (wake_at is not None and wake_at <= now),
            version,
        )
        for run_id, name, status, hint, wake_at, version in rows
    }


def expired_engines(claims: ClaimRegistry, cutoff: datetime) -> list[str]:
    """Other engines whose lease ended before ``cutoff`` and that still hold claims."""
    holds = Exists(Claim.objects.filter(holder_id=OuterRef("pk")))
    return list(
        Engine.objects.using(claims.using)
        .filter(lease_expires_at__lt=cutoff)
        .exclude(id=claims.engine_id)
        .filter(holds)
        .order_by("id")
        .values_list("id", flat=True)
    )


def _move(
    claims: ClaimRegistry,
    rows: list[tuple[str, int]],
    runs: dict[str, tuple[str, str, bool, int]],
    names: Collection[str],
    batch: Batch,
    *,
    holder_id: str | None,
) -> None:
    """Inside the batch's transaction: move the locked ``rows`` whose run is active
    and of ``names`` (of a version served, when ``names`` is a
    :class:`~..claims.served.Served`; and not in cooldown) to this engine. Rolls
    back when the row count differs, or when there is nothing to move."""
    take = []
    for run_id, epoch in rows:
        run = runs.get(run_id)
        if run is None or run[1] not in ACTIVE_STATUSES or not admits(names, run[0], run[3]):
            continue
        if claims.cooldown.blocked_until(run_id) is not None:
            batch.skipped.append(run_id)
        else:
            take.append((run_id, epoch))
    if not take:
        raise _Rollback("nothing to move")
    ids = [run_id for run_id, _epoch in take]
    condition = {"holder_id": holder_id} if holder_id is not None else {"holder__isnull": True}
    moved = (
        Claim.objects.using(claims.using)
        .filter(workflow_id__in=ids, **condition)
        .update(holder_id=claims.engine_id, epoch=F("epoch") + 1, claimed_at=claims.stamp())
    )
    if moved != len(ids):
        raise _Rollback("race")
    batch.won.update((run_id, epoch + 1) for run_id, epoch in take)
    batch.due.update((run_id, runs[run_id][2]) for run_id in ids)


def expired_page_query(holder_id: str, *, after: str, using: str) -> QuerySet[Claim]:
    """``holder_id``'s claims after the keyset cursor, in id order."""
    return (
        Claim.objects.using(using)
        .filter(holder_id=holder_id, workflow_id__gt=after)
        .order_by("workflow_id")
    )


def take_from_expired(
    claims: ClaimRegistry,
    holder_id: str,
    cutoff: datetime,
    names: Collection[str],
    now: datetime,
    *,
    after: str = "",
    limit: int = BATCH,
) -> tuple[Batch, str | None]:
    """One batch of ``holder_id``'s claims (after the keyset cursor ``after``):
    the batch, and the cursor for the next one (None: no more rows)."""
    batch = Batch(holder_id=holder_id)
    if claims.disposing:
        return batch, None
    using = claims.using
    page: list[tuple[str, int]] = []
    try:
        with transaction.atomic(using=using), bounded_lock_wait(using, PASS_LOCK_WAIT):
            bumped = (
                Engine.objects.using(using)
                .filter(id=holder_id, lease_expires_at__lt=cutoff)
                .update(revocations=F("revocations") + 1)
            )
            if bumped != 1:
                batch.holder_live = True
                raise _Rollback("live")
            in_index_order(using)
            query = _lock_rows(expired_page_query(holder_id, after=after, using=using), using)
            page = list(query.values_list("workflow_id", "epoch")[:limit])
            runs = _runs(using, [run_id for run_id, _epoch in page], now)
            _move(claims, page, runs, names, batch, holder_id=holder_id)
    except _Rollback as why:
        _rolled_back(batch, str(why), page)
    except OperationalError as exc:
        if not is_lock_failure(exc):
            raise
        _rolled_back(batch, "busy", page)
        return batch, None
    if batch.holder_live or len(page) < limit:
        return batch, None
    return batch, page[-1][0]


def _rolled_back(batch: Batch, why: str, rows: list[tuple[str, int]]) -> None:
    batch.won.clear()
    batch.due.clear()
    if why == "race":
        batch.fallback = [run_id for run_id, _epoch in rows]
    elif why == "busy":
        batch.busy = True
    if why != "nothing to move":
        batch.skipped.clear()


def ownerless_page_query(status: str, *, after: str, using: str) -> QuerySet[Any, tuple[Any, ...]]:
    """``status`` runs after the keyset cursor in id order (the ``(status, id)``
    index), each with its claim's holder and whether it has a claim row."""
    claim = Claim.objects.filter(workflow_id=OuterRef("pk"))
    return (
        WorkflowRun.objects.using(using)
        .filter(status=status, pk__gt=after)
        .annotate(
            holder=Subquery(claim.values("holder_id")[:1]),
            has_claim=Exists(claim),
        )
        .order_by("pk")
        .values_list("pk", "workflow_name", "holder", "has_claim")
    )


def ownerless_page(
    names: Collection[str], status: str, *, after: str = "", limit: int = BATCH, using: str
) -> tuple[list[str], list[str], str | None]:
    """A page of ``status`` runs: (ids of ``names`` with a claim row and no holder,
    ids of ``names`` with no claim row at all, the cursor for the next page)."""
    with transaction.atomic(using=using):
        in_index_order(using)
        page = list(ownerless_page_query(status, after=after, using=using)[:limit])
    free = [run_id for run_id, name, holder, has in page if name in names and has and not holder]
    no_row = [run_id for run_id, name, _holder, has in page if name in names and not has]
    return free, no_row, page[-1][0] if len(page) == limit else None


def released_page_query(*, after: str, using: str) -> QuerySet[Any, Any]:
    """The ids of claims let go of before their run ended, after the keyset
    cursor, in id order (``weft_claim_released_idx``)."""
    return (
        Claim.objects.using(using)
        .filter(holder__isnull=True, released_at__isnull=False, workflow_id__gt=after)
        .order_by("workflow_id")
        .values_list("workflow_id", flat=True)
    )


def released_page(
    names: Collection[str], *, after: str = "", limit: int = BATCH, using: str
) -> tuple[list[str], str | None]:
    """A page of the claims let go of before their run ended (``released_at``,
    off its partial index, in id order after the keyset cursor), then their runs
    by primary key: (the ids of started runs of ``names`` among them, the
    cursor for the next page). Claims whose run has ended or is gone are
    unstamped here, so they leave the index."""
    page = list(released_page_query(after=after, using=using)[:limit])
    runs = {
        run_id: (status, name)
        for run_id, status, name in WorkflowRun.objects.using(using)
        .filter(pk__in=page)
        .values_list("pk", "status", "workflow_name")
    }
    free = [
        run_id
        for run_id in page
        if run_id in runs and runs[run_id][0] in STARTED and runs[run_id][1] in names
    ]
    unstamp_ended(
        using, [run_id for run_id in page if runs.get(run_id, ("",))[0] not in ACTIVE_STATUSES]
    )
    return free, page[-1] if len(page) == limit else None


def take_ownerless(
    claims: ClaimRegistry, run_ids: list[str], names: Collection[str], now: datetime
) -> Batch:
    """Take the claims of ``run_ids`` that still have no holder, in one transaction."""
    batch = Batch()
    if claims.disposing:
        batch.lost = list(run_ids)
        return batch
    if not run_ids:
        return batch
    using = claims.using
    rows: list[tuple[str, int]] = []
    try:
        with transaction.atomic(using=using), bounded_lock_wait(using, PASS_LOCK_WAIT):
            query = (
                Claim.objects.using(using)
                .filter(workflow_id__in=run_ids, holder__isnull=True)
                .order_by("workflow_id")
            )
            rows = list(_lock_rows(query, using).values_list("workflow_id", "epoch"))
            if not rows:
                raise _Rollback("nothing to move")
            runs = _runs(using, [run_id for run_id, _epoch in rows], now)
            _move(claims, rows, runs, names, batch, holder_id=None)
    except _Rollback as why:
        _rolled_back(batch, str(why), rows)
    except OperationalError as exc:
        if not is_lock_failure(exc):
            raise
        _rolled_back(batch, "busy", rows)
    return batch


@dataclass
class Settled:
    """Runs kept (id -> whether a turn is due now), and ids released because the
    engine started disposing."""

    kept: dict[str, bool] = field(default_factory=dict)
    released: list[str] = field(default_factory=list)


def settle(claims: ClaimRegistry, batch: Batch, *, takeover: bool) -> Settled:
    """Adopt what a batch won, or release it at once when the engine is disposing."""
    settled = Settled()
    if not batch.won:
        return settled
    if claims.disposing:
        for run_id, epoch in batch.won.items():
            release_held(claims.using, run_id, claims.engine_id, epoch)
        settled.released = list(batch.won)
        return settled
    claims.adopt(batch.won, takeover=takeover)
    settled.kept = {run_id: batch.due.get(run_id, True) for run_id in batch.won}
    return settled


class Budget:
    """A pass's time budget on the monotonic clock."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline


#: Per engine: where its sweep over ownerless runs stopped (status -> cursor),
#: so a pass that ran out of time carries on where the last one stopped.
SWEEPS: weakref.WeakKeyDictionary[ClaimRegistry, dict[str, str]] = weakref.WeakKeyDictionary()
#: Per engine: when (monotonic) its last full sweep of the started runs ended.
FULL_SWEPT: weakref.WeakKeyDictionary[ClaimRegistry, float] = weakref.WeakKeyDictionary()
