"""The queries behind every scan: new work, due wakes, reclaim candidates.

Each returns workflow ids (in a stable order, bounded by ``limit``) for the
ownership strategy of the configured mode to claim and its host to drive.
``names`` is the list of workflow types the calling process has registered:
a run it could not drive is never selected.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Exists, OuterRef, Q, QuerySet

from ...models import ACTIVE_STATUSES, Claim, RunStatus, WorkflowRun, db_for


def partial_indexes(using: str) -> bool:
    """Whether ``using`` has the partial indexes the polls and the ownerless
    sweep start from (PostgreSQL, SQLite; not MySQL/MariaDB)."""
    return bool(connections[using].features.supports_partial_indexes)


def chunks(items: list[str], size: int) -> Iterator[list[str]]:
    """``items`` in lists of at most ``size``."""
    for index in range(0, len(items), size):
        yield items[index : index + size]


def of_held_runs(
    rows: QuerySet[Any], holder_id: str | None, names: Collection[str]
) -> QuerySet[Any]:
    """``rows`` (of a table with a ``run`` key) whose run ``holder_id`` holds; when
    None, whose run is a started run of ``names`` (the global lease holds them all)."""
    if holder_id is not None:
        mine = Claim.objects.filter(workflow_id=OuterRef("run_id"), holder_id=holder_id)
        return rows.filter(Exists(mine))
    return rows.filter(
        run__status__in=(RunStatus.RUNNING, RunStatus.WAITING), run__workflow_name__in=list(names)
    )


def has_holder() -> Exists:
    return Exists(Claim.objects.filter(workflow_id=OuterRef("pk"), holder__isnull=False))


def _runs(using: str | None) -> QuerySet[WorkflowRun]:
    return WorkflowRun.objects.using(db_for(using))


def pending_due_filter(now: datetime) -> Q:
    """A run is *pending and due* at ``now``: pending, with no start time or one
    that has come (``start_at <= now``). :func:`pending_due_sql` is its SQL twin."""
    return Q(status=RunStatus.PENDING) & (Q(start_at__isnull=True) | Q(start_at__lte=now))


def pending_due_sql(status: str, start_at: str, *, scheduled: bool) -> str:
    """:func:`pending_due_filter` as a SQL condition on the (quoted) ``status`` and
    ``start_at`` columns, split in the ready queue's two branches (their union is
    the rule): runs without a start time, or (``scheduled``) those whose start
    time has come, with one ``%s`` parameter, ``now``.

    The status is a literal, not a parameter: a partial index is only usable
    when the planner can see that the query implies its condition."""
    pending = f"{status} = '{RunStatus.PENDING.value}'"
    if scheduled:
        return f"{pending} AND {start_at} IS NOT NULL AND {start_at} <= %s"
    return f"{pending} AND {start_at} IS NULL"


def _due_pending(now: datetime, using: str | None) -> QuerySet[WorkflowRun]:
    return _runs(using).filter(pending_due_filter(now)).order_by("created_at", "pk")


def pending_due(now: datetime, *, limit: int = 100, using: str | None = None) -> list[str]:
    """Pending runs whose start time has come and that nobody holds."""
    return list(_due_pending(now, using).filter(~has_holder()).values_list("pk", flat=True)[:limit])


#: The statuses of a run that has started and not ended.
STARTED_STATUSES = (RunStatus.RUNNING, RunStatus.WAITING)

#: Rows per page of :func:`woken`: small enough that a planner with no
#: statistics still walks the index in order rather than sorting the table.
WOKEN_PAGE = 64


def _woken_sql(using: str, column: str, *, due: bool, after: bool, size: int) -> str:
    """The SQL of one page of :func:`woken`: written by hand (the fast tick runs it
    on every wake-up, where building it with the ORM cost more than the read).
    (id, status, workflow name, holder, ``column``) of the runs with ``column``
    set (``due``: at most ``now``, one ``%s``), after the keyset ``after`` (three
    ``%s``: value, value, id), in ``(column, id)`` order. The holder is a scalar
    subquery per returned row (read by primary key); the filter is on ``column``
    alone, so the statement walks that column's index in order up to ``size``
    rows whatever the statistics say (a filter on the status or the holder in
    SQL would let a planner with a stale estimate scan the table instead)."""
    key = (using, column, due, after, size)
    sql = _WOKEN_SQL.get(key)
    if sql is not None:
        return sql
    quote = connections[using].ops.quote_name
    run, claim = quote(WorkflowRun._meta.db_table), quote(Claim._meta.db_table)
    pk, col = quote("id"), quote(column)
    where = f"r.{col} <= %s" if due else f"r.{col} IS NOT NULL"
    if after:
        where += f" AND (r.{col} > %s OR (r.{col} = %s AND r.{pk} > %s))"
    sql = (
        f"SELECT r.{pk}, r.{quote('status')}, r.{quote('workflow_name')}, "
        f"(SELECT c.{quote('holder_id')} FROM {claim} c WHERE c.{quote('workflow_id')} = r.{pk}"
        f" LIMIT 1), r.{col} FROM {run} r WHERE {where} ORDER BY r.{col}, r.{pk} LIMIT {int(size)}"
    )
    _WOKEN_SQL[key] = sql
    return sql


_WOKEN_SQL: dict[tuple[str, str, bool, bool, int], str] = {}


def _woken_page(
    using: str, column: str, now: datetime | None, after: tuple[Any, str] | None, size: int
) -> list[tuple[str, str, str, str | None, Any]]:
    """One page of the runs with ``column`` set (at most ``now`` when given) in
    ``(column, id)`` order after the keyset ``after`` (a row's last two values,
    as the database returned them): (id, status, workflow name, holder, column
    value)."""
    connection = connections[using]
    params: list[Any] = []
    if now is not None:
        params.append(connection.ops.adapt_datetimefield_value(now))
    if after is not None:
        params += [after[0], after[0], after[1]]
    sql = _woken_sql(using, column, due=now is not None, after=after is not None, size=size)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [tuple(row) for row in cursor.fetchall()]


def _woken_first_pages(
    using: str, now: datetime, size: int
) -> dict[str, list[tuple[str, str, str, str | None, Any]]]:
    """The first page of each kind of :func:`woken` (hinted, then due), both in
    one statement: each branch the statement of :func:`_woken_sql`, in a
    derived table of its own (the form every database takes: SQLite allows no
    ``ORDER BY``/``LIMIT`` in a compound branch), tagged with its kind; each
    page in ``(column, id)`` order."""
    key = (using, "", True, False, size)
    sql = _WOKEN_SQL.get(key)
    if sql is None:
        parts = [
            _woken_sql(using, column, due=due, after=False, size=size)
            for column, due in (("wake_hint_at", False), ("wake_at", True))
        ]
        sql = " UNION ALL ".join(
            f"SELECT {n} AS k, w{n}.* FROM ({part}) w{n}" for n, part in enumerate(parts)
        )
        _WOKEN_SQL[key] = sql
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, [connection.ops.adapt_datetimefield_value(now)])
        rows = cursor.fetchall()
    pages: dict[str, list[tuple[str, str, str, str | None, Any]]] = {}
    for n, column in enumerate(("wake_hint_at", "wake_at")):
        page = [tuple(row[1:]) for row in rows if row[0] == n]
        pages[column] = sorted(page, key=lambda row: (row[4], row[0]))
    return pages


@dataclass
class Woken:
    """What the fast tick's query found: ``held``, the runs this engine holds
    that are due; ``free``, started runs of the registered types that are due
    and that nobody holds (released: the release rule, :mod:`.release`)."""

    held: list[str] = field(default_factory=list)
    free: list[str] = field(default_factory=list)


def woken(
    engine_id: str,
    now: datetime,
    names: Collection[str] = (),
    *,
    limit: int = 500,
    using: str | None = None,
) -> Woken:
    """Runs with a wake hint, then those whose timer or deadline is due: the fast
    tick's query. Each kind is read off its own index (``wake_hint_at``,
    ``wake_at``, then ``id``) in pages of :data:`WOKEN_PAGE`, until ``limit``
    runs are found or none is left, so the cost follows the runs that are due
    in the store, not the parked runs this engine holds (a walk of its claims
    would cost in proportion to them, several times a second), nor the
    ownerless ones. Kept: the active runs this engine
    holds (``held``), and the running or waiting runs of ``names`` that have no
    holder (``free``: released by a graceful stop, a ``resume``, a Celery
    pass, and now due), which the tick takes at once instead of leaving them
    to the next reclaim pass. The same rows are read either way: finding the
    free ones costs no statement."""
    using = db_for(using)
    kinds = (("wake_hint_at", None), ("wake_at", now))
    held: dict[str, None] = {}
    free: dict[str, None] = {}
    names = frozenset(names)
    size = max(min(limit, WOKEN_PAGE), 1)
    first = _woken_first_pages(using, now, size)  # one statement for the usual case
    for column, due in kinds:
        after: tuple[Any, str] | None = None
        while len(held) + len(free) < limit:
            page = (
                first.pop(column) if after is None else _woken_page(using, column, due, after, size)
            )
            for run_id, status, name, holder, _value in page:
                if holder == engine_id and status in ACTIVE_STATUSES:
                    held[run_id] = None
                elif holder is None and status in STARTED_STATUSES and name in names:
                    free[run_id] = None
            if len(page) < size:
                break
            after = (page[-1][4], page[-1][0])
    return Woken(list(held), [run_id for run_id in free if run_id not in held])


def held_woken(
    engine_id: str, now: datetime, *, limit: int = 500, using: str | None = None
) -> list[str]:
    """The active runs this engine holds with a wake hint, then those whose timer
    or deadline is due (:func:`woken`'s ``held``)."""
    return woken(engine_id, now, limit=limit, using=using).held[:limit]


def started(names: list[str], *, using: str | None = None) -> QuerySet[WorkflowRun]:
    """Running or waiting runs of ``names`` (mode ``lease``: all of them are held)."""
    return _runs(using).filter(status__in=STARTED_STATUSES, workflow_name__in=names).order_by("pk")


def started_due(
    now: datetime, names: list[str], *, limit: int = 500, using: str | None = None
) -> list[str]:
    """Started runs of ``names`` with a wake hint or a due timer (mode ``lease``)."""
    return list(
        started(names, using=using)
        .filter(Q(wake_hint_at__isnull=False) | Q(wake_at__lte=now))
        .values_list("pk", flat=True)[:limit]
    )


def ownerless_active(*, limit: int = 500, using: str | None = None) -> list[str]:
    """Running or waiting runs with no holder at all (e.g. after a graceful shutdown)."""
    return list(
        _runs(using)
        .filter(status__in=(RunStatus.RUNNING, RunStatus.WAITING))
        .filter(~has_holder())
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


def expired_holders(cutoff: datetime, *, limit: int = 500, using: str | None = None) -> list[str]:
    """Active runs whose holder's lease ended before ``cutoff`` (now - 2 x renew)."""
    return list(
        Claim.objects.using(db_for(using))
        .filter(holder__isnull=False, holder__lease_expires_at__lt=cutoff)
        .filter(
            Exists(
                WorkflowRun.objects.filter(pk=OuterRef("workflow_id"), status__in=ACTIVE_STATUSES)
            )
        )
        .order_by("workflow_id")
        .values_list("workflow_id", flat=True)[:limit]
    )


def workflow_names(run_ids: list[str], *, using: str | None = None) -> dict[str, str]:
    """Run id -> workflow name, for the ids that exist."""
    return dict(_runs(using).filter(pk__in=run_ids).values_list("pk", "workflow_name"))


def is_active(run_id: str, *, using: str | None = None) -> bool:
    return _runs(using).filter(pk=run_id, status__in=ACTIVE_STATUSES).exists()


def live_holders(
    run_ids: list[str], cutoff: datetime, *, using: str | None = None
) -> dict[str, str]:
    """Run id -> holder engine id, for those of ``run_ids`` whose holder's lease is
    live at ``cutoff`` (now - 2 x renew: not expired on the database clock)."""
    if not run_ids:
        return {}
    return dict(
        Claim.objects.using(db_for(using))
        .filter(workflow_id__in=run_ids, holder__lease_expires_at__gte=cutoff)
        .values_list("workflow_id", "holder_id")
    )
