"""Concurrency slots: at most N turns of a queue (M per key) at once, on every
worker, exactly.

A queue with ``concurrency`` N has the slot rows ``(queue, "", 0..N-1)``; a
key with ``per_key_concurrency`` M has ``(queue, key, 0..M-1)`` (made on first
use, by an INSERT that ignores existing rows). The unique constraint on
``(queue, key, slot_no)`` makes a holder beyond the limit impossible.

**Who holds a slot.** A slot row names the run, the engine and the claim epoch
of the turn that took it. It is *held* only while the run's claim still names
that engine at that epoch; it is *free* when ``run_id`` is empty or the claim
has moved on (a takeover bumps the epoch, a revocation too, a graceful stop
releases the holder). So the takeover that frees a crashed or frozen worker's
claims frees its slots in the same statement, nothing leaks and nothing is
counted twice; and a stale owner cannot use a slot it lost, because all its
writes are fenced by the same epoch. "The claim no longer names (run, engine,
epoch)" can never become true again: epochs only go up.

**Taking** is a compare-and-set: one read of the queue's (or key's) slot rows
with whether each holder's claim still names it, then one conditional UPDATE
on a free row *as read* (its run, engine and epoch unchanged); the row count
says who won. **Releasing** is one UPDATE on the rows the turn holds, by
run, engine and epoch; on PostgreSQL it is folded into the turn's last write
(its park or finish statement, :func:`free_sql`). On PostgreSQL the common
case of taking is one statement too (:mod:`.admission`).
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q

from ..models import Claim, QueueSlot

Group = tuple[str, int]  # (key, size): "" and N for the queue, a key and M for it
Row = tuple[str, int, str | None, str, int, bool]


def _rows(using: str, queue: str, groups: list[Group]) -> list[Row]:
    """The slot rows of ``groups`` in one read, each with whether its holder's
    claim still names it."""
    live = Claim.objects.filter(
        workflow_id=OuterRef("run_id"), holder_id=OuterRef("engine_id"), epoch=OuterRef("epoch")
    )
    wanted = Q()
    for key, size in groups:
        wanted |= Q(key=key, slot_no__lt=size)
    return list(
        QueueSlot.objects.using(using)
        .filter(wanted, queue=queue)
        .annotate(live=Exists(live))
        .values_list("key", "slot_no", "run_id", "engine_id", "epoch", "live")
    )


def _make(using: str, queue: str, groups: list[Group]) -> None:
    QueueSlot.objects.using(using).bulk_create(
        [QueueSlot(queue=queue, key=key, slot_no=n) for key, size in groups for n in range(size)],
        ignore_conflicts=True,
    )


def take_slots(
    using: str,
    queue: str,
    groups: list[Group],
    *,
    run_id: str,
    engine_id: str,
    epoch: int,
    now: datetime,
) -> bool:
    """Take one slot of each group (``(key, size)``: key ``""`` is the queue's
    own limit) for the turn of ``run_id`` at ``epoch``: True when every group
    gave one (or already held one for that turn). Call inside a transaction:
    on False the caller rolls back what was taken."""
    rows = _rows(using, queue, groups)
    if len(rows) < sum(size for _key, size in groups):
        _make(using, queue, groups)
        rows = _rows(using, queue, groups)
    slots = QueueSlot.objects.using(using).filter(queue=queue)
    for key, _size in groups:
        mine = [r for r in rows if r[0] == key]
        if any(r[2] == run_id and r[3] == engine_id and r[4] == epoch and r[5] for r in mine):
            continue  # this turn (or an earlier turn at this epoch) holds it
        free = [r for r in mine if r[2] is None or not r[5]]
        random.shuffle(free)  # racing engines try different rows
        for _key, slot_no, holder_run, holder_engine, holder_epoch, _live in free:
            taken = slots.filter(
                key=key,
                slot_no=slot_no,
                run_id=holder_run,
                engine_id=holder_engine,
                epoch=holder_epoch,
            ).update(run_id=run_id, engine_id=engine_id, epoch=epoch, taken_at=now)
            if taken == 1:
                break
        else:
            return False
    return True


def take_slot(
    using: str,
    queue: str,
    key: str,
    size: int,
    *,
    run_id: str,
    engine_id: str,
    epoch: int,
    now: datetime,
) -> bool:
    """:func:`take_slots` of one group."""
    return take_slots(
        using, queue, [(key, size)], run_id=run_id, engine_id=engine_id, epoch=epoch, now=now
    )


#: A released slot's columns (:func:`release_slots`, and the PostgreSQL
#: statements that fold the release into a turn's last write: :func:`free_sql`).
RELEASED = {"run_id": None, "engine_id": "", "epoch": 0, "taken_at": None}


def release_slots(using: str, run_id: str, engine_id: str, epoch: int) -> int:
    """Free every slot the turn of ``run_id`` at ``epoch`` holds (how many)."""
    return (
        QueueSlot.objects.using(using)
        .filter(run_id=run_id, engine_id=engine_id, epoch=epoch)
        .update(**RELEASED)
    )


def free_sql(connection: Any, alias: str = "s") -> str:
    """``UPDATE <slots> <alias> SET`` the released columns (:data:`RELEASED`):
    the head of the release a PostgreSQL statement folds into a turn's last
    write; the caller adds ``FROM`` / ``WHERE`` by run, engine and epoch."""
    table = connection.ops.quote_name(QueueSlot._meta.db_table)
    sets = ", ".join(
        f"{name} = {'NULL' if value is None else repr(value)}" for name, value in RELEASED.items()
    )
    return f"UPDATE {table} {alias} SET {sets}"


def slots_in_use(using: str) -> dict[tuple[str, str], int]:
    """(queue, key) -> slots held now (key ``""``: the queue's global limit)."""
    live = Claim.objects.filter(
        workflow_id=OuterRef("run_id"), holder_id=OuterRef("engine_id"), epoch=OuterRef("epoch")
    )
    counts: dict[tuple[str, str], int] = {}
    for queue, key in (
        QueueSlot.objects.using(using)
        .filter(run_id__isnull=False)
        .filter(Exists(live))
        .values_list("queue", "key")
    ):
        counts[(queue, key)] = counts.get((queue, key), 0) + 1
    return counts
