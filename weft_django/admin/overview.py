"""The data of the operator overview: one screen, a constant number of queries.

Every list is bounded (``LIMIT``) and every count capped (``COUNT(*)`` over a
``LIMIT`` subquery), each served by an index, so the page costs the same at a
thousand runs and at a million: the database clock (1 query), engines (1),
all counts (1), stuck claims (1), suspended and failed runs of the last day
(2), old pending signals and update requests (2), and the retention summary
(table sizes from the catalog and the oldest prunable run: at most five).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from ..conf import Timing, get_settings
from ..models import (
    Claim,
    Engine,
    EngineStatus,
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowRun,
    WorkflowSignal,
    db_for,
)
from ..ownership.modes import ownership_class
from ..runtime import retention_stats

#: Runs counted per status on the overview before it says "1,000+".
STATUS_COUNT_CAP = 1_000
#: Rows listed per section (the section links to the full, filtered changelist).
SECTION_LIMIT = 20
#: Engines listed: every running one and those stopped in the last day, newest first.
ENGINE_LIMIT = 50
#: Signals and update requests pending for longer than this are listed.
DEFAULT_PENDING_AGE = timedelta(minutes=1)
RECENT = timedelta(days=1)

PASS_ORDER = ("renew", "reclaim", "signal_poll", "update_poll")


def retention_summary(using: str | None) -> dict[str, Any]:
    """Table sizes and the oldest prunable run (docs/retention.md)."""
    return retention_stats.summary(using=using)


def engine_state(engine: Engine, now: datetime, timing: Timing) -> str:
    """stopped / expired (past the grace) / expiring (two renewals missed) / live."""
    if engine.status == EngineStatus.STOPPED:
        return "stopped"
    if timing.is_expired(engine.lease_expires_at, now):
        return "expired"
    left = (engine.lease_expires_at - now).total_seconds()
    if left < timing.ttl - timing.expiry_grace:
        return "expiring"
    return "live"


def pass_rows(passes: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The last result of each pass, known passes first, counts per outcome."""
    passes = passes if isinstance(passes, dict) else {}
    names = [name for name in PASS_ORDER if name in passes]
    names += sorted(name for name in passes if name not in PASS_ORDER)
    rows = []
    for name in names:
        found = passes.get(name)
        summary: dict[str, Any] = found if isinstance(found, dict) else {}
        found = summary.get("counts")
        counts: dict[str, Any] = found if isinstance(found, dict) else {}
        rows.append(
            {
                "name": name,
                "finished_at": summary.get("finished_at"),
                "seconds": summary.get("seconds"),
                "succeeded": summary.get("succeeded"),
                "counts": sorted(counts.items()),
                "failures": len(summary.get("failures") or []),
            }
        )
    return rows


#: Claims counted per engine on the overview before it says "10,000+".
CLAIMS_COUNT_CAP = 10_000


def claims_held(connection: BaseDatabaseWrapper) -> models.Expression:
    """Claims held per engine, counted up to :data:`CLAIMS_COUNT_CAP` + 1 (a
    correlated ``LIMIT`` subquery) so the overview's cost does not grow with the
    number of parked runs. MariaDB allows no outer reference inside a derived
    table: there the count is exact."""
    if connection.vendor == "mysql":
        return Coalesce(
            Subquery(
                Claim.objects.filter(holder=OuterRef("pk"))
                .order_by()
                .values("holder")
                .annotate(n=Count("*"))
                .values("n")
            ),
            0,
        )
    qn = connection.ops.quote_name
    claim, engine = Claim._meta.db_table, Engine._meta.db_table
    return RawSQL(
        f"(SELECT COUNT(*) FROM (SELECT 1 FROM {qn(claim)} c WHERE c.{qn('holder_id')} = "
        f"{qn(engine)}.{qn('id')} LIMIT %s) held)",
        (CLAIMS_COUNT_CAP + 1,),
        output_field=models.IntegerField(),
    )


def capped_counts(queries: dict[str, models.QuerySet], cap: int, using: str) -> dict[str, int]:
    """``{key: min(count, cap + 1)}`` for each queryset, in one statement (one
    scalar subquery per queryset: ``COUNT(*)`` over ``LIMIT cap + 1``)."""
    parts: list[str] = []
    params: list[Any] = []
    connection = connections[using]
    for index, queryset in enumerate(queries.values()):
        # The queryset's own order is kept: ordered like an index, the database
        # walks that index and stops at the LIMIT instead of collecting every
        # match (a bitmap scan) first.
        limited = queryset.using(using).values("pk")[: cap + 1]
        sql, sql_params = limited.query.get_compiler(using=using).as_sql()
        parts.append(f"(SELECT COUNT(*) FROM ({sql}) {connection.ops.quote_name(f'c{index}')})")
        params.extend(sql_params)
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts), params)
        row = cursor.fetchone()
    return dict(zip(queries, (int(value) for value in row), strict=True))


@dataclass
class Count_:
    value: int
    cap: int

    @property
    def capped(self) -> bool:
        return self.value > self.cap

    def __str__(self) -> str:
        return f"{self.cap:,}+" if self.capped else f"{self.value:,}"


def overview_data(
    now: datetime, *, pending_age: timedelta = DEFAULT_PENDING_AGE, using: str | None = None
) -> dict[str, Any]:
    """Everything the overview shows, judged against ``now`` (the database clock)."""
    using = db_for(using)
    settings = get_settings()
    engine_timing = ownership_class(settings.ownership).timing_of(settings)
    claim_cutoff = settings.claim_timing.cutoff(now)
    since = now - RECENT
    old = now - pending_age

    engines = list(
        Engine.objects.using(using)
        .filter(~Q(status=EngineStatus.STOPPED) | Q(stopped_at__gte=since))
        .annotate(claims_held=claims_held(connections[using]))
        .order_by("-started_at")[:ENGINE_LIMIT]
    )
    engine_rows = [
        {
            "engine": engine,
            "claims_held": Count_(engine.claims_held, CLAIMS_COUNT_CAP),
            "state": engine_state(engine, now, engine_timing),
            "lease_left": (engine.lease_expires_at - now).total_seconds(),
            "passes": pass_rows(engine.passes),
        }
        for engine in engines
    ]

    runs = WorkflowRun.objects.using(using)
    stuck = Claim.objects.using(using).filter(holder__lease_expires_at__lt=claim_cutoff)
    signals = WorkflowSignal.objects.using(using).filter(
        consumed_at__isnull=True, created_at__lt=old
    )
    updates = UpdateRequest.objects.using(using).filter(
        status=UpdateStatus.PENDING, created_at__lt=old
    )
    recent_suspended = runs.filter(status=RunStatus.SUSPENDED, updated_at__gte=since)
    recent_failed = runs.filter(status=RunStatus.FAILED, finished_at__gte=since)
    count_queries: dict[str, models.QuerySet] = {
        f"status:{status}": runs.filter(status=status).order_by("status", "created_at")
        for status in RunStatus.values
    }
    count_queries.update(
        stuck=stuck.order_by(),
        signals=signals.order_by(),
        updates=updates.order_by(),
        suspended=recent_suspended.order_by("status", "created_at"),
        failed=recent_failed.order_by("finished_at"),
    )
    counts = capped_counts(count_queries, STATUS_COUNT_CAP, using)

    def count(key: str) -> Count_:
        return Count_(counts[key], STATUS_COUNT_CAP)

    return {
        "now": now,
        "pending_age": pending_age,
        "engines": engine_rows,
        "engine_limit": ENGINE_LIMIT,
        "statuses": [
            {"status": status, "label": label, "count": count(f"status:{status}")}
            for status, label in RunStatus.choices
        ],
        "stuck_claims": list(
            stuck.select_related("holder").order_by("holder__lease_expires_at", "workflow_id")[
                :SECTION_LIMIT
            ]
        ),
        "stuck_count": count("stuck"),
        "suspended_runs": list(recent_suspended.order_by("-updated_at")[:SECTION_LIMIT]),
        "suspended_count": count("suspended"),
        "failed_runs": list(recent_failed.order_by("-finished_at")[:SECTION_LIMIT]),
        "failed_count": count("failed"),
        "old_signals": list(signals.order_by("id")[:SECTION_LIMIT]),
        "signals_count": count("signals"),
        "old_updates": list(updates.order_by("id")[:SECTION_LIMIT]),
        "updates_count": count("updates"),
        "retention": retention_summary(using),
        "section_limit": SECTION_LIMIT,
    }
