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
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

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


def _holder() -> Subquery:
    """The run's claim holder, as a scalar subquery in the select list: read by
    primary key for the rows returned only."""
    return Subquery(Claim.objects.filter(workflow_id=OuterRef("pk")).values("holder_id")[:1])


def _woken_page(
    runs: QuerySet[WorkflowRun], column: str, after: tuple[Any, str] | None, size: int
) -> list[tuple[str, str, str, str | None, Any]]:
    """One page of ``runs`` in ``(column, id)`` order after the keyset ``after``:
    (id, status, workflow name, holder, column value). The statement filters on
    ``column`` alone, so it walks that column's index in order up to ``size``
    rows whatever the statistics say (a filter on the status or the holder in
    SQL would let a planner with a stale estimate scan the table instead)."""
    if after is not None:
        runs = runs.filter(
            Q(**{f"{column}__gt": after[0]}) | Q(**{column: after[0], "pk__gt": after[1]})
        )
    return list(
        runs.annotate(holder=_holder())
        .order_by(column, "pk")
        .values_list("pk", "status", "workflow_name", "holder", column)[:size]
    )


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
    kinds = (
        ("wake_hint_at", _runs(using).filter(wake_hint_at__isnull=False)),
        ("wake_at", _runs(using).filter(wake_at__lte=now)),
    )
    held: dict[str, None] = {}
    free: dict[str, None] = {}
    names = frozenset(names)
    size = max(min(limit, WOKEN_PAGE), 1)
    for column, runs in kinds:
        after: tuple[Any, str] | None = None
        while len(held) + len(free) < limit:
            page = _woken_page(runs, column, after, size)
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
