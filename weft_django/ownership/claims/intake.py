"""New-run intake: take the next pending runs in batches, whatever the statistics say.

The ready queue is an index on ``WorkflowRun`` (``weft_run_ready_idx``:
``start_at, created_at, id`` over pending runs only, a partial index on
PostgreSQL and SQLite; on MariaDB/MySQL, which has no partial indexes, the
existing ``weft_run_active_idx`` on ``status, start_at, created_at`` plus
InnoDB's implicit primary key already is that order). Pickup is two statements:

1. **The window**: the first ``window`` due pending runs, read straight off
   that index in its own order with a ``LIMIT``: one branch for runs without
   a start time (``start_at IS NULL``), one for runs whose start time has
   come (a range on ``start_at``). The claim of each row is read by a scalar
   subquery per *returned* row, and held rows are skipped in Python: there is
   no join or anti-join the planner could turn into a pass over the backlog,
   so the cost does not grow with the pending backlog, nor with the parked or
   finished runs (they are not in the index, or not in its ``pending`` part).
2. **The claim**: one multi-row ``INSERT ... ON CONFLICT DO NOTHING RETURNING``
   (``INSERT OR IGNORE`` on SQLite, ``INSERT IGNORE`` on MariaDB) of epoch-1
   claims for the window's runs that never had a claim, sized to the free
   capacity; a row another engine inserted first is simply not returned. Runs
   whose claim row exists and is free (released at a shutdown) go through the
   registry's single-run ``acquire`` (a conditional UPDATE on the epoch read).

The fencing rules are :mod:`weft_django.ownership.claims.registry`'s: epoch 1 for a
workflow id that never had a claim, a won claim recorded through the
registry (its local view, cooldown, metrics), nothing taken while the engine
is disposing or for a run in its anti-thrash cooldown.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections

from ...models import Claim, RunStatus, WorkflowRun, db_for
from ..passes.scans import pending_due_sql
from .first import insert_first_claims
from .priority import PRIORITY_INDEX, FlowBudget, by_priority
from .registry import ClaimRegistry
from .results import Acquired
from .served import served_sql

#: How many candidate runs the first window reads per unit of free capacity:
#: room for the runs at the head of the queue that other engines claimed and
#: have not started yet.
WINDOW_FACTOR = 4
#: At most this many pages per pickup, each starting where the one before
#: ended (when the runs of the first ones were held, or won by other engines).
MAX_WINDOWS = 8


@dataclass(frozen=True)
class Candidate:
    """A due pending run, with its claim row's epoch and holder (None: no row)."""

    run_id: str
    epoch: int | None
    holder_id: str | None
    #: Its place in the queue: (branch, start_at, created_at), as read (for paging).
    key: tuple[Any, ...] = ()
    priority: int = 0
    queue: str = "default"
    concurrency_key: str | None = None
    #: Read by the priority branch (not part of a page of the ready queue).
    fast_lane: bool = False

    def due_since(self) -> Any:
        """When it became due: its start time, else its creation."""
        return self.key[1] if self.key and self.key[1] is not None else self.key[2]


#: The ready queue's index (models.WorkflowRun.Meta.indexes, migration 0007).
READY_INDEX = "weft_run_ready_idx"

# Where a page of one branch starts: after the (start_at, created_at, id) of the
# last row of the page before (None: at the head of the queue).
After = tuple[Any, Any, str] | None


def _unindexed(connection: Any, column: str) -> str:
    """``column`` as a plain filter: the planner must not pick the workflow-name
    index instead of the ready queue (it holds every run of that name, finished
    ones too; with stale statistics PostgreSQL and SQLite did pick it for the
    scheduled branch). MariaDB keeps the queue's index on its own."""
    if connection.vendor == "sqlite":
        return f"+{column}"  # SQLite's documented "do not use an index" operator
    if connection.vendor == "postgresql":
        return f"({column} || '')"
    return column


def _ready_index_hint(connection: Any) -> str:
    """SQLite: name the ready queue's index (``INDEXED BY``). Its planner has no
    statistics to tell it apart from the other indexes that lead with the status
    (the admin's and retention's), and picked them, then sorted the backlog."""
    if connection.vendor == "sqlite":
        return f" INDEXED BY {connection.ops.quote_name(READY_INDEX)}"
    return ""


def _branch_sql(connection: Any, names_sql: str, *, scheduled: bool, after: After) -> str:
    quote = connection.ops.quote_name
    run, claim = quote(WorkflowRun._meta.db_table), quote(Claim._meta.db_table)
    run_id = f"r.{quote('id')}"
    start_at, created_at = f"r.{quote('start_at')}", f"r.{quote('created_at')}"
    own_claim = f"FROM {claim} c WHERE c.{quote('workflow_id')} = {run_id}"
    where = [pending_due_sql(f"r.{quote('status')}", start_at, scheduled=scheduled), names_sql]
    if after is not None:
        # Past the last row read, in index order: a range bound the index can
        # seek to (>=), then a filter that only drops the ties before it.
        if scheduled:
            where.append(
                f"{start_at} >= %s AND ({start_at} > %s OR {created_at} > %s "
                f"OR ({created_at} = %s AND {run_id} > %s))"
            )
        else:
            where.append(f"{created_at} >= %s AND ({created_at} > %s OR {run_id} > %s)")
    # The index's own order. Without a start time that is (created_at, id):
    # MariaDB only walks its index without a sort when the ORDER BY leaves the
    # IS NULL column out, PostgreSQL only when it names it.
    order = f"{created_at}, {run_id}"
    if scheduled or connection.vendor != "mysql":
        order = f"{start_at}, {order}"
    return (
        f"SELECT {run_id}, (SELECT c.{quote('epoch')} {own_claim}), "
        f"(SELECT c.{quote('holder_id')} {own_claim}), {int(scheduled)}, {start_at}, "
        f"{created_at}, {_flow_columns(connection)} FROM {run} r{_ready_index_hint(connection)} "
        f"WHERE {' AND '.join(where)} ORDER BY {order} LIMIT %s"
    )


def _flow_columns(connection: Any) -> str:
    quote = connection.ops.quote_name
    return ", ".join(f"r.{quote(c)}" for c in ("priority", "queue", "concurrency_key"))


def _priority_sql(connection: Any, names_sql: str) -> str:
    """The fast lane: due pending runs of a positive priority, highest first, read
    off ``weft_run_priority_idx`` (status, -priority, created_at, id)."""
    quote = connection.ops.quote_name
    run, claim = quote(WorkflowRun._meta.db_table), quote(Claim._meta.db_table)
    run_id = f"r.{quote('id')}"
    start_at, created_at = f"r.{quote('start_at')}", f"r.{quote('created_at')}"
    priority = f"r.{quote('priority')}"
    own_claim = f"FROM {claim} c WHERE c.{quote('workflow_id')} = {run_id}"
    hint = f" INDEXED BY {quote(PRIORITY_INDEX)}" if connection.vendor == "sqlite" else ""
    return (
        f"SELECT {run_id}, (SELECT c.{quote('epoch')} {own_claim}), "
        f"(SELECT c.{quote('holder_id')} {own_claim}), 2, {start_at}, {created_at}, "
        f"{_flow_columns(connection)} FROM {run} r{hint} "
        f"WHERE r.{quote('status')} = '{RunStatus.PENDING.value}' AND {priority} > 0 "
        f"AND ({start_at} IS NULL OR {start_at} <= %s) AND {names_sql} "
        f"ORDER BY r.{quote('status')}, {priority} DESC, {created_at}, {run_id} LIMIT %s"
    )


def _branch_params(
    now: Any, names: Sequence[Any], limit: int, *, scheduled: bool, after: After
) -> list[Any]:
    params: list[Any] = [now] if scheduled else []
    params += names
    if after is not None:
        start, created, run_id = after
        if scheduled:
            params += [start, start, created, created, run_id]
        else:
            params += [created, created, run_id]
    return [*params, limit]


def window_statement(
    connection: Any,
    now: datetime,
    names: Collection[str],
    limit: int,
    pages: dict[bool, After],
    *,
    priority: bool = False,
) -> tuple[str, list[Any]]:
    """One statement reading a page of each branch in ``pages`` (scheduled? ->
    where its page starts): ``limit`` rows at most per branch. ``names`` given
    as a :class:`~.served.Served` reads only runs of the versions it serves."""
    stamp = connection.ops.adapt_datetimefield_value(now)
    quote = connection.ops.quote_name
    names_sql, names_params = served_sql(
        connection,
        _unindexed(connection, "r." + quote("workflow_name")),
        "r." + quote("workflow_version"),
        names,
        queue_column=_unindexed(connection, "r." + quote("queue")),
    )
    parts, params = [], []
    if priority:
        parts.append(_priority_sql(connection, names_sql))
        params += [stamp, *names_params, limit]
    for scheduled, after in sorted(pages.items()):
        parts.append(_branch_sql(connection, names_sql, scheduled=scheduled, after=after))
        params += _branch_params(stamp, names_params, limit, scheduled=scheduled, after=after)
    # Each branch keeps its own ORDER BY and LIMIT inside a derived table (the
    # portable spelling: SQLite refuses them directly in a compound SELECT).
    sql = " UNION ALL ".join(f"SELECT * FROM ({part}) w{n}" for n, part in enumerate(parts))
    return sql, params


def ready_window(
    now: datetime,
    names: Collection[str],
    limit: int,
    *,
    pages: dict[bool, After] | None = None,
    using: str | None = None,
    priority: bool = False,
) -> list[Candidate]:
    """Up to ``limit`` due pending runs of ``names`` per branch, in queue order
    (runs without a start time, then those whose start time has come), each
    with its claim row's epoch and holder. ``pages``: which branches to read
    and where each starts (default: both, from the head)."""
    if not names or limit <= 0:
        return []
    connection = connections[db_for(using)]
    sql, params = window_statement(
        connection,
        now,
        names,
        limit,
        {False: None, True: None} if pages is None else pages,
        priority=priority,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        Candidate(
            run_id,
            epoch,
            holder,
            (bool(branch == 1), start, created),
            priority=prio,
            queue=queue,
            concurrency_key=key,
            fast_lane=branch == 2,
        )
        for run_id, epoch, holder, branch, start, created, prio, queue, key in rows
    ]


def claim_ready(
    claims: ClaimRegistry, now: datetime, names: Collection[str], capacity: int
) -> list[str]:
    """Claim up to ``capacity`` due pending runs of ``names``; the ids won, in
    queue order. A page reads ``WINDOW_FACTOR x capacity`` candidates per
    branch; the next page (at most :data:`MAX_WINDOWS`) starts where the last
    one ended, only when the runs of this one were held or won by others."""
    won: list[str] = []
    limit = WINDOW_FACTOR * capacity
    pages: dict[bool, After] = {False: None, True: None}
    budget = FlowBudget(claims.using)
    for page in range(MAX_WINDOWS):
        if len(won) >= capacity or claims.disposing or not pages:
            break
        window = ready_window(now, names, limit, pages=pages, using=claims.using, priority=not page)
        seen: set[str] = set()
        fresh = []
        for c in by_priority(window, now):
            if c.run_id not in seen and claims.may_take(c.run_id) and budget.admits(c):
                fresh.append(c)
            seen.add(c.run_id)
        won += _claim_window(claims, fresh, capacity - len(won))
        for scheduled in list(pages):
            rows = [c for c in window if c.key[0] == scheduled and not c.fast_lane]
            if len(rows) < limit:
                del pages[scheduled]  # this branch has no more due runs
            else:
                last = rows[-1]
                pages[scheduled] = (last.key[1], last.key[2], last.run_id)
    return won


def _claim_window(claims: ClaimRegistry, candidates: list[Candidate], free: int) -> list[str]:
    """Claim up to ``free`` of ``candidates``: new claims in batches of the
    capacity still free (one INSERT each, a next batch only when other engines
    won part of this one), free existing claims one conditional UPDATE each."""
    won: list[str] = []
    new = [c.run_id for c in candidates if c.epoch is None]
    released = [c for c in candidates if c.epoch is not None and c.holder_id is None]
    # (Both lists keep the candidates' order: priority first, then due time.)
    while new and len(won) < free:
        batch, new = new[: free - len(won)], new[free - len(won) :]
        if claims.disposing:
            return won
        inserted = set(
            insert_first_claims(claims.using, claims.engine_id, batch, stamp=claims.stamp_value())
        )
        for run_id in batch:  # in queue order
            if run_id in inserted:
                claims.record_acquired(run_id, 1)
                won.append(run_id)
    for candidate in released:
        if len(won) >= free:
            break
        result = claims.acquire(candidate.run_id, expected_epoch=candidate.epoch)
        if isinstance(result, Acquired):
            won.append(candidate.run_id)
    return won
