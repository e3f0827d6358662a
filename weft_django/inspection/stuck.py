"""Stuck runs: runs that something should be moving but nobody has owned for
longer than ``CLAIM_TTL`` -- the admin overview's section and ``manage.py weft
stuck`` (docs/admin.md).

A run is listed when, for longer than ``CLAIM_TTL``,

* it is **queued**: pending and due (``start_at`` passed, or none);
* its **timer** is due (``wake_at``), or it has a **wake hint** (a signal,
  update or operator's wake-up left for its owner, ``wake_hint_at``);
* it waits on a **signal** that is buffered, or has a pending **update**;

and it has no owner that was live within ``CLAIM_TTL``: no claim holder, a
holder whose lease ended more than ``CLAIM_TTL`` ago, or a claim released more
than ``CLAIM_TTL`` ago (``released_at``); and the ownership strategy of the
configured mode names no live owner for it now (``live_owners``: in mode
``lease`` the live holder of the store-wide lease owns every run, with no
claim rows; one more statement, only when there are candidates).

Each kind is read off its own index, in that index's order, with a ``LIMIT``
of :data:`WINDOW` rows and a filter on the indexed column only (the ready
queue ``weft_run_ready_idx`` in its two branches, ``weft_run_wake_at_idx``,
``weft_run_wake_hint_idx``, and the partial indexes of unconsumed signals
and pending updates); the holder is read per returned row by a scalar
subquery on the claim's primary key, and the rest is judged in Python. No
leg joins or scans the finished runs: they are in none of these indexes.
MariaDB/MySQL have no partial indexes: there the signal and update legs are
left out (a signal or update leaves a wake hint, which the hint leg reads).
The legs are one statement (``UNION ALL`` of the bounded legs, each a derived
table with its own ``ORDER BY ... LIMIT``), whatever the size of the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import F, OuterRef, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform

from ..models import (
    ACTIVE_STATUSES,
    Claim,
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowRun,
    WorkflowSignal,
)
from ..ownership import as_aware

#: Rows read per kind: the list is complete up to this many candidates of each.
WINDOW = 100
STARTED = (RunStatus.RUNNING, RunStatus.WAITING)

#: The reasons, in the order they are read.
QUEUED, TIMER, HINT, SIGNAL, UPDATE = "queued", "timer due", "wake hint", "signal", "update"
#: The second leg of the ready queue (runs with a start time); shown as ``queued``.
SCHEDULED = "scheduled"


@dataclass
class StuckRun:
    run_id: str
    workflow_name: str
    status: str
    #: Since when it has been due / hinted / messaged (the oldest of its reasons).
    since: datetime
    reasons: list[str] = field(default_factory=list)
    #: Its claim holder (an expired one), or None.
    holder_id: str | None = None
    #: When its owner was last seen: the holder's lease end or the claim's release.
    owner_seen: datetime | None = None


@dataclass
class StuckRuns:
    runs: list[StuckRun]
    #: Whether some kind filled its window: there may be more than listed.
    capped: bool

    @property
    def count(self) -> str:
        return f"{len(self.runs)}+" if self.capped else str(len(self.runs))


def _claim(column: str, run_key: str) -> Subquery:
    claim = Claim.objects.filter(workflow_id=OuterRef(run_key))
    return Subquery(claim.values(column)[:1])


def _with_owner(rows: QuerySet[Any], run_key: str) -> QuerySet[Any]:
    return rows.annotate(
        holder=_claim("holder_id", run_key),
        holder_lease=_claim("holder__lease_expires_at", run_key),
        released=_claim("released_at", run_key),
    )


COLUMNS = ("run_key", "workflow", "run_status", "since", "holder", "holder_lease", "released")


def _runs(using: str, leg: str, old: datetime) -> QuerySet[Any]:
    runs = WorkflowRun.objects.using(using).annotate(
        run_key=F("pk"), workflow=F("workflow_name"), run_status=F("status")
    )
    order: tuple[str, ...]
    if leg == QUEUED:
        # The ready queue's two branches, each in its index order (like the
        # intake's): runs without a start time, queued since ``created_at``
        # (MariaDB walks its index only when the ORDER BY leaves the IS NULL
        # column out, PostgreSQL only when it names it)...
        rows = runs.filter(status=RunStatus.PENDING, start_at__isnull=True, created_at__lt=old)
        rows = rows.annotate(since=F("created_at"))
        mysql = connections[using].vendor == "mysql"
        order = ("created_at", "pk") if mysql else ("start_at", "created_at", "pk")
    elif leg == SCHEDULED:
        # ... and runs whose start time has passed, due since ``start_at``.
        rows = runs.filter(status=RunStatus.PENDING, start_at__lt=old)
        rows = rows.annotate(since=F("start_at"))
        order = ("start_at", "created_at", "pk")
    else:
        column = "wake_at" if leg == TIMER else "wake_hint_at"
        rows = runs.filter(**{f"{column}__lt": old}).annotate(since=F(column))
        order = (column, "pk")
    return _with_owner(rows.order_by(*order), "pk")


def _signals(using: str, old: datetime) -> QuerySet[Any]:
    rows = WorkflowSignal.objects.using(using).filter(
        consumed_at__isnull=True,
        created_at__lt=old,
        run__status=RunStatus.WAITING,
        run__waiting_on__kind="signal",
        name=KeyTextTransform("name", "run__waiting_on"),
    )
    rows = rows.annotate(
        run_key=F("run_id"),
        workflow=F("run__workflow_name"),
        run_status=F("run__status"),
        since=F("created_at"),
    )
    return _with_owner(rows.order_by("run_id", "name", "id"), "run_id")


def _updates(using: str, old: datetime) -> QuerySet[Any]:
    rows = UpdateRequest.objects.using(using).filter(
        status=UpdateStatus.PENDING, created_at__lt=old, run__status__in=STARTED
    )
    rows = rows.annotate(
        run_key=F("run_id"),
        workflow=F("run__workflow_name"),
        run_status=F("run__status"),
        since=F("created_at"),
    )
    return _with_owner(rows.order_by("run_id", "id"), "run_id")


def _legs(using: str, old: datetime) -> list[tuple[str, QuerySet[Any]]]:
    legs = [(leg, _runs(using, leg, old)) for leg in (QUEUED, SCHEDULED, TIMER, HINT)]
    if connections[using].features.supports_partial_indexes:
        legs += [(SIGNAL, _signals(using, old)), (UPDATE, _updates(using, old))]
    return legs


LiveOwners = Callable[[list[str]], dict[str, str]]


def stuck_runs(
    now: datetime,
    ttl: float,
    *,
    limit: int,
    using: str,
    live_owners: LiveOwners | None = None,
) -> StuckRuns:
    """The runs stuck at ``now`` (the database clock) for longer than ``ttl`` seconds,
    oldest first, at most ``limit`` of them. ``live_owners(run_ids)`` (the
    ownership strategy's) drops the candidates a live engine owns now."""
    old = now - timedelta(seconds=ttl)
    legs = _legs(using, old)
    found: dict[str, StuckRun] = {}
    read = [0] * len(legs)
    for leg, run_id, name, status, since, holder, holder_lease, released in _read(legs, using):
        read[leg] += 1
        _judge(
            found,
            QUEUED if legs[leg][0] == SCHEDULED else legs[leg][0],
            old,
            run_id,
            name,
            status,
            as_aware(since),
            holder,
            None if holder_lease is None else as_aware(holder_lease),
            None if released is None else as_aware(released),
        )
    if found and live_owners is not None:
        for run_id in live_owners(list(found)):
            found.pop(run_id, None)
    runs = sorted(found.values(), key=lambda run: (run.since, run.run_id))
    capped = any(count >= WINDOW for count in read)
    return StuckRuns(runs[:limit], capped or len(runs) > limit)


def _read(legs: list[tuple[str, QuerySet[Any]]], using: str) -> list[tuple[Any, ...]]:
    """Every leg's rows, in one ``UNION ALL`` statement, each row led by its leg's index."""
    connection = connections[using]
    parts: list[str] = []
    params: list[Any] = []
    for index, (_reason, rows) in enumerate(legs):
        bounded = rows.values_list(*COLUMNS)[:WINDOW]
        sql, sql_params = bounded.query.get_compiler(using=using).as_sql()
        alias = connection.ops.quote_name(f"leg{index}")
        columns = ", ".join(f"{alias}.{connection.ops.quote_name(c)}" for c in COLUMNS)
        parts.append(f"SELECT {index}, {columns} FROM ({sql}) {alias}")
        params.extend(sql_params)
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), params)
        return list(cursor.fetchall())


def _judge(
    found: dict[str, StuckRun],
    reason: str,
    old: datetime,
    run_id: str,
    name: str,
    status: str,
    since: datetime,
    holder: str | None,
    holder_lease: datetime | None,
    released: datetime | None,
) -> None:
    """Add ``run_id`` to ``found`` (or its reason to its entry) when it is stuck."""
    if status not in ACTIVE_STATUSES or (reason != QUEUED and status not in STARTED):
        return
    seen = holder_lease if holder is not None else released
    if seen is not None and seen >= old:
        return  # owned within the TTL: live, or only just lost
    run = found.get(run_id)
    if run is None:
        run = found[run_id] = StuckRun(run_id, name, status, since, [], holder, seen)
    run.since = min(run.since, since)
    if reason not in run.reasons:
        run.reasons.append(reason)
