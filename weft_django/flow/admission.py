"""A turn's admission in one statement on PostgreSQL, and a batch's (internal).

:func:`~.gate.admit` takes a turn's slots and rate tokens all or none. The
general path (:func:`.slots.take_slots`, :func:`.rate.take_token`, every
database) is a transaction of a read and compare-and-set UPDATEs: five round
trips. On PostgreSQL, :func:`admit_in_one_statement` does the common case in
one, an autocommitted statement:

- per group (the queue's own limit, the key's): one slot row that is
  **released** (``run_id`` empty) or already this turn's, locked ``FOR UPDATE
  SKIP LOCKED``: two turns never lock the same row, and a row another turn
  took since the statement's snapshot is judged again on its new values. The
  judgment reads only the slot row's own columns, so that re-check is exact;
  a row whose holder's claim has moved on (a takeover, a revocation) is free
  too, but judging that needs the claims table as of *now*, which a re-check
  under the statement's snapshot cannot give: such rows are left to the
  general path;
- the rate cells, locked ``FOR UPDATE`` in key order (the queue's first), so
  concurrent admissions queue on them and each judges the cell as the one
  before it left it;
- then, only when every group gave a slot and every cell a token, the slots'
  UPDATE and the cells' move (the GCRA step of :mod:`.rate`).

What it cannot settle it hands back (``general``): a group with fewer rows
than its size (made on first use), a missing rate cell, or a group whose
only free rows are held by claims that moved on. The gate then runs the
general path, which handles all of these; refusals it can settle (every slot
held by a live claim, the rate window shut) are final.

:func:`admit_in_order` admits the first turns of a batch of new runs of one
queue at once (the worker's pickup, :func:`~.gate.admit_ahead`): as many
released slots as there are runs, and as many tokens, in one statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import BigIntegerField, Case, Value, When

from ..models import Claim, QueueRate, QueueSlot
from ..ownership import hot_cursor
from .rate import moved_tat, tokens_at

Group = tuple[str, int]  # (key, size), as in .slots
Cell = tuple[str, float, int]  # (key, rate per second, burst)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the statement decided: ``admitted``; else ``why`` (``"slot"`` or
    ``"rate"``) and, refused by the rate, when the window ``opens``; or
    ``general``: not settled here (nothing was taken)."""

    admitted: bool
    why: str = ""
    opens: datetime | None = None
    general: bool = False


def admit_in_one_statement(
    using: str,
    queue: str,
    groups: list[Group],
    cells: list[Cell],
    *,
    run_id: str,
    engine_id: str,
    epoch: int,
    now: datetime,
) -> Verdict:
    """Take one slot of each group and one token of each cell for the turn
    of ``run_id`` at ``epoch``, all or none, in one statement (PostgreSQL)."""
    connection = connections[using]
    turn = (run_id, engine_id, epoch)
    sql, params = _statement(connection, queue, groups, cells, turn, now)
    with hot_cursor(connection) as cursor:  # prepared where the connection allows
        cursor.execute(sql, params)
        row = cursor.fetchone()
    admitted, found, cell_rows, tats, totals, stale = row
    if admitted:
        return Verdict(True)
    for index, (_key, size) in enumerate(groups):
        if found[index]:
            continue
        if totals[index] < size or stale[index] > 0:
            return Verdict(False, general=True)  # rows to make, or stale holders to judge
        return Verdict(False, "slot")
    if cell_rows < len(cells):
        return Verdict(False, general=True)  # a cell's first use
    opens = [
        tat - timedelta(seconds=(burst - 1) / rate)
        for (_key, rate, burst), tat in zip(cells, tats, strict=True)
        if tat is not None and tat > now + timedelta(seconds=(burst - 1) / rate)
    ]
    return Verdict(False, "rate", opens=max(opens) if opens else now)


def _statement(
    connection: Any,
    queue: str,
    groups: list[Group],
    cells: list[Cell],
    turn: tuple[str, str, int],
    now: datetime,
) -> tuple[str, list[Any]]:
    """The SQL and parameters of :func:`admit_in_one_statement` for the turn
    ``(run_id, engine_id, epoch)``."""
    run_id, engine_id, epoch = turn
    quote = connection.ops.quote_name
    slot_table = quote(QueueSlot._meta.db_table)
    rate_table = quote(QueueRate._meta.db_table)
    claim_table = quote(Claim._meta.db_table)
    parts: list[str] = []
    params: list[Any] = []
    mine = "s.run_id = %s AND s.engine_id = %s AND s.epoch = %s"
    for index, (key, size) in enumerate(groups):
        # This turn's own row first (left by a release that failed), then the lowest.
        parts.append(
            f"g{index} AS MATERIALIZED (SELECT s.id FROM {slot_table} s "
            "WHERE s.queue = %s AND s.key = %s AND s.slot_no < %s "
            f"AND (s.run_id IS NULL OR ({mine})) "
            "ORDER BY s.run_id IS NULL, s.slot_no LIMIT 1 FOR UPDATE OF s SKIP LOCKED)"
        )
        params += [queue, key, size, run_id, engine_id, epoch]
    keys = [key for key, _rate, _burst in cells] or [""]
    parts.append(
        f"c AS MATERIALIZED (SELECT t.id, t.key, t.tat FROM {rate_table} t "
        f"WHERE t.queue = %s AND t.key IN ({', '.join(['%s'] * len(keys))}) "
        f"{'' if cells else 'AND false '}ORDER BY t.key FOR UPDATE OF t)"
    )
    params += [queue, *keys]
    found = [f"(SELECT count(*) FROM g{index})" for index in range(len(groups))]
    tokens = []
    for key, rate, burst in cells:
        tokens.append(
            "(SELECT count(*) FROM c WHERE c.key = %s AND (c.tat IS NULL "
            "OR c.tat <= %s::timestamptz + %s::float8 * interval '1 second'))"
        )
        params += [key, now, (burst - 1) / rate]
    judged = [f"{count} = 1" for count in found + tokens] or ["true"]
    parts.append(f"ok AS MATERIALIZED (SELECT {' AND '.join(judged)} AS admitted)")
    if groups:
        taken = " UNION ALL ".join(f"SELECT id FROM g{index}" for index in range(len(groups)))
        parts.append(
            f"took AS (UPDATE {slot_table} s SET run_id = %s, engine_id = %s, epoch = %s, "
            f"taken_at = %s FROM ok WHERE ok.admitted AND s.id IN ({taken}))"
        )
        params += [run_id, engine_id, epoch, now]
    if cells:
        step = "CASE t.key " + " ".join("WHEN %s THEN %s::float8" for _ in cells) + " END"
        parts.append(
            f"moved AS (UPDATE {rate_table} t SET tat = GREATEST(COALESCE(t.tat, "
            f"%s::timestamptz), %s::timestamptz) + {step} * interval '1 second' "
            "FROM ok WHERE ok.admitted AND t.id IN (SELECT id FROM c))"
        )
        params += [now, now]
        for key, rate, _burst in cells:
            params += [key, 1.0 / rate]
    # Read only when refused (a CASE evaluates its subqueries lazily): how many
    # rows each group has, and how many name a claim that has moved on as of the
    # statement's snapshot (a released row it did not get, another turn was
    # taking: that is a refusal).
    live = (
        f"EXISTS (SELECT 1 FROM {claim_table} cl WHERE cl.workflow_id = s.run_id "
        "AND cl.holder_id = s.engine_id AND cl.epoch = s.epoch)"
    )
    where = f"FROM {slot_table} s WHERE s.queue = %s AND s.key = %s AND s.slot_no < %s"
    totals = [f"CASE WHEN ok.admitted THEN 0 ELSE (SELECT count(*) {where}) END"] * len(groups)
    stale = [
        f"CASE WHEN ok.admitted THEN 0 ELSE (SELECT count(*) {where} "
        f"AND s.run_id IS NOT NULL AND NOT {live}) END"
    ] * len(groups)
    tats = ["(SELECT c.tat FROM c WHERE c.key = %s)"] * len(cells)
    select = (
        "SELECT ok.admitted, "
        f"ARRAY[{', '.join(f'{count} > 0' for count in found)}]::boolean[], "
        "(SELECT count(*) FROM c), "
        f"ARRAY[{', '.join(tats)}]::timestamptz[], "
        f"ARRAY[{', '.join(totals)}]::bigint[], "
        f"ARRAY[{', '.join(stale)}]::bigint[] FROM ok"
    )
    # The SELECT's parameters, in order: the cells' keys, then the groups' twice.
    params += [key for key, _rate, _burst in cells]
    for key, size in groups:
        params += [queue, key, size]
    for key, size in groups:
        params += [queue, key, size]
    return "WITH " + ", ".join(parts) + " " + select, params


def admit_in_order(
    using: str,
    queue: str,
    size: int | None,
    cell: Cell | None,
    runs: list[tuple[str, int]],
    *,
    engine_id: str,
    now: datetime,
) -> int:
    """Admit the first turns of new runs of ``queue`` (``(run_id, epoch)``,
    claimed by this engine), in order: one released slot each of the queue's
    ``size`` (None: no concurrency limit) and one token each of the queue's
    rate ``cell`` (None: no rate). Returns how many of ``runs``, from the
    first, were admitted: as many as there were slots and tokens for (0 when
    the slot rows or the cell do not exist yet, and on a database without
    ``SKIP LOCKED``, SQLite: each turn is then admitted for itself).

    The GCRA step of :mod:`.rate` for ``n`` turns at once
    (:func:`~.rate.tokens_at`, :func:`~.rate.moved_tat`), as ``n`` admissions
    one after another would. PostgreSQL: one statement; MariaDB/MySQL: one
    transaction (the released rows read ``FOR UPDATE SKIP LOCKED``, the cell
    ``FOR UPDATE``, then one UPDATE of the rows taken and one of the cell).
    """
    connection = connections[using]
    if not runs:
        return 0
    if connection.vendor != "postgresql":
        if not connection.features.has_select_for_update_skip_locked:
            return 0
        return _in_order_locking(using, queue, size, cell, runs, engine_id=engine_id, now=now)
    quote = connection.ops.quote_name
    slot_table = quote(QueueSlot._meta.db_table)
    rate_table = quote(QueueRate._meta.db_table)
    parts: list[str] = []
    params: list[Any] = []
    limits = ["%s"]
    params_n: list[Any] = [len(runs)]
    if size is not None:
        parts.append(
            "g AS MATERIALIZED (SELECT f.id, row_number() OVER (ORDER BY f.slot_no) AS rn "
            f"FROM (SELECT s.id, s.slot_no FROM {slot_table} s WHERE s.queue = %s "
            "AND s.key = '' AND s.slot_no < %s AND s.run_id IS NULL "
            "ORDER BY s.slot_no LIMIT %s FOR UPDATE OF s SKIP LOCKED) f)"
        )
        params += [queue, size, len(runs)]
        limits.append("(SELECT count(*) FROM g)")
    if cell is not None:
        _key, rate, burst = cell
        parts.append(
            f"c AS MATERIALIZED (SELECT t.id, t.tat FROM {rate_table} t "
            "WHERE t.queue = %s AND t.key = '' FOR UPDATE OF t)"
        )
        params.append(queue)
        # A millionth of a token absorbs the float error of tau / T.
        limits.append(
            "COALESCE((SELECT CASE WHEN c.tat IS NULL THEN %s "
            "WHEN c.tat <= %s::timestamptz + %s::float8 * interval '1 second' "
            "THEN 1 + floor(extract(epoch FROM (%s::timestamptz "
            "+ %s::float8 * interval '1 second' - GREATEST(c.tat, %s::timestamptz))) "
            "/ %s::float8 + 0.000001)::bigint ELSE 0 END FROM c), 0)"
        )
        tau = (burst - 1) / rate
        params_n += [burst, now, tau, now, tau, now, 1.0 / rate]
    parts.append(f"n AS MATERIALIZED (SELECT LEAST({', '.join(limits)}) AS n)")
    params += params_n
    if size is not None:
        parts.append(
            f"took AS (UPDATE {slot_table} s SET run_id = (%s::text[])[g.rn], engine_id = %s, "
            "epoch = (%s::bigint[])[g.rn], taken_at = %s FROM g, n "
            "WHERE s.id = g.id AND g.rn <= n.n)"
        )
        params += [[run_id for run_id, _ in runs], engine_id, [e for _, e in runs], now]
    if cell is not None:
        parts.append(
            f"moved AS (UPDATE {rate_table} t SET tat = GREATEST(COALESCE(t.tat, "
            "%s::timestamptz), %s::timestamptz) + n.n * %s::float8 * interval '1 second' "
            "FROM n WHERE n.n > 0 AND t.id IN (SELECT id FROM c))"
        )
        params += [now, now, 1.0 / cell[1]]
    sql = "WITH " + ", ".join(parts) + " SELECT n.n FROM n"
    with hot_cursor(connection) as cursor:
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0])


def _in_order_locking(
    using: str,
    queue: str,
    size: int | None,
    cell: Cell | None,
    runs: list[tuple[str, int]],
    *,
    engine_id: str,
    now: datetime,
) -> int:
    """:func:`admit_in_order` as one transaction of locking reads and UPDATEs."""
    with transaction.atomic(using=using):
        count = len(runs)
        slot_ids: list[int] = []
        if size is not None:
            slot_ids = list(
                QueueSlot.objects.using(using)
                .select_for_update(skip_locked=True)
                .filter(queue=queue, key="", slot_no__lt=size, run_id__isnull=True)
                .order_by("slot_no")
                .values_list("id", flat=True)[:count]
            )
            count = len(slot_ids)
        cells = QueueRate.objects.using(using).filter(queue=queue, key="")
        tat = None
        if cell is not None and count:
            found = list(cells.select_for_update().values_list("tat", flat=True)[:1])
            if not found:
                return 0  # the cell's first use: each turn makes it
            tat = found[0]
            count = min(count, tokens_at(tat, now, cell[1], cell[2]))
        if size is not None and count:
            # Locked by this transaction since they were read released: taken, in
            # one UPDATE, the n-th row by the n-th run.
            pairs = list(zip(slot_ids[:count], runs, strict=False))
            QueueSlot.objects.using(using).filter(pk__in=slot_ids[:count]).update(
                run_id=Case(*(When(pk=slot, then=Value(run)) for slot, (run, _e) in pairs)),
                epoch=Case(
                    *(When(pk=slot, then=Value(epoch)) for slot, (_r, epoch) in pairs),
                    output_field=BigIntegerField(),
                ),
                engine_id=engine_id,
                taken_at=now,
            )
        if cell is not None and count:
            cells.update(tat=moved_tat(tat, now, cell[1], count))
        return count
