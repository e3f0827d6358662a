"""The data of the operator overview: one screen, a constant number of queries.

Every list is bounded (``LIMIT``) and every count capped (``COUNT(*)`` over a
``LIMIT`` subquery), each served by an index, so the page costs the same at a
thousand runs and at a million: the database clock (1 query), engines (3:
live, dead, recently stopped; the engines of Celery passes are not listed),
the Celery pass summaries (1), all counts (1), stuck claims (1), stuck runs
(:mod:`.stuck`: 1, and 1 more to ask the ownership mode who owns the
candidates, when there are any), suspended and failed runs of the last day (2), old
pending signals and update requests (2), and the retention summary (table
sizes from the catalog and the oldest prunable run: at most five).

Errors and payloads are shown as JSON (``json.dumps`` with an indent), never
as Python's repr.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections, models

from ..conf import Timing, get_settings
from ..flow.overview import queue_overview
from ..inspection.engines import CLAIMS_COUNT_CAP, claims_held
from ..models import (
    Claim,
    Engine,
    EngineKind,
    EngineStatus,
    PassKind,
    PassSummary,
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowRun,
    WorkflowSignal,
    db_for,
)
from ..ownership import ownership_class, ownership_for
from ..retention import stats as retention_stats
from ..stored_json import UndecodableJSON
from .activity import activity_charts
from .stuck import stuck_runs
from .versions import unserved_runs

#: Runs counted per status on the overview before it says "1,000+".
STATUS_COUNT_CAP = 1_000
#: Rows listed per section (the section links to the full, filtered changelist).
SECTION_LIMIT = 20
#: Live engines listed (all of them, in practice: beyond it the list says "and N more").
LIVE_ENGINE_LIMIT = 200
#: Dead engines (lease expired, never stopped) listed, most recently dead first.
DEAD_ENGINE_LIMIT = 20
#: Engines stopped in the last day listed, most recently stopped first.
STOPPED_ENGINE_LIMIT = 20
#: Engine kinds listed as engine rows: the Celery passes' short-lived engines are
#: not (their results are the "Celery passes" section).
LISTED_KINDS = tuple(kind for kind in EngineKind.values if kind != EngineKind.CELERY)
NOT_STOPPED = (EngineStatus.RUNNING, EngineStatus.DISPOSING)
#: The engine id the overview asks the ownership strategy as (it registers no row).
OVERVIEW_ENGINE_ID = "weft-admin-overview"
#: Signals and update requests pending for longer than this are listed.
DEFAULT_PENDING_AGE = timedelta(minutes=1)
RECENT = timedelta(days=1)

PASS_ORDER = ("renew", "reclaim", "signal_poll", "update_poll")


def retention_summary(using: str | None) -> dict[str, Any]:
    """Table sizes and the oldest prunable run (docs/retention.md)."""
    return retention_stats.summary(using=using)


def as_json(value: Any) -> str:
    """``value`` as indented JSON (what the overview shows for errors and payloads)."""
    if isinstance(value, UndecodableJSON):
        return str(value)  # "(payload cannot be shown: ...)"
    return json.dumps(value, indent=2, sort_keys=True, cls=DjangoJSONEncoder, ensure_ascii=False)


def ago(seconds: float) -> str:
    """A duration in the past, e.g. ``"12 s"``, ``"4 min"``, ``"3 h"``, ``"2 d"``."""
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def engine_state(engine: Engine, now: datetime, timing: Timing) -> str:
    """stopped / dead (lease expired past the grace, never stopped) / expiring (two
    renewals missed) / live."""
    if engine.status == EngineStatus.STOPPED:
        return "stopped"
    if timing.is_expired(engine.lease_expires_at, now):
        return "dead"
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


def engine_row(engine: Engine, now: datetime, timing: Timing) -> dict[str, Any]:
    """One engine row: its state, and its lease left (live) or how long ago it
    ended (dead: since its lease expired; stopped: since it stopped)."""
    state = engine_state(engine, now, timing)
    left = (engine.lease_expires_at - now).total_seconds()
    ended = engine.stopped_at if state == "stopped" else engine.lease_expires_at
    return {
        "engine": engine,
        "claims_held": Count_(cast(Any, engine).claims_held, CLAIMS_COUNT_CAP),
        "state": state,
        "lease_left": left if state in ("live", "expiring") else None,
        "ended_ago": ago((now - ended).total_seconds()) if ended and left < 0 else None,
        "passes": pass_rows(engine.passes),
    }


def pass_summaries(now: datetime, using: str) -> list[dict[str, Any]]:
    """The last run of each Celery pass (one ``PassSummary`` row per kind, one
    query), the known kinds first; a kind that never ran is listed as such."""
    rows = {row.kind: row for row in PassSummary.objects.using(using).order_by()}
    kinds = [*PassKind.values, *sorted(kind for kind in rows if kind not in PassKind.values)]
    labels = dict(PassKind.choices)
    found: list[dict[str, Any]] = []
    for kind in kinds:
        row = rows.get(kind)
        if row is None:
            if kind != PassKind.PRUNE:  # the prune task is off unless scheduled
                found.append({"kind": kind, "label": labels.get(kind, kind), "row": None})
            continue
        counts = row.counts if isinstance(row.counts, dict) else {}
        found.append(
            {
                "kind": kind,
                "label": labels.get(kind, kind),
                "row": row,
                "ago": ago((now - row.finished_at).total_seconds()),
                "seconds": (row.finished_at - row.started_at).total_seconds(),
                "counts": sorted(counts.items()),
                "failures_json": as_json(row.failures) if row.failures else "",
                "last_error_ago": (
                    ago((now - row.last_error_at).total_seconds()) if row.last_error_at else None
                ),
            }
        )
    return found


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

    engines = Engine.objects.using(using)
    cutoff = engine_timing.cutoff(now)
    running = engines.filter(status__in=NOT_STOPPED).exclude(kind=EngineKind.CELERY)
    live, dead = (
        running.filter(lease_expires_at__gte=cutoff),
        running.filter(lease_expires_at__lt=cutoff),
    )
    stopped = engines.filter(
        status=EngineStatus.STOPPED, kind__in=LISTED_KINDS, stopped_at__gte=since
    )
    held = claims_held(connections[using])
    # One statement for the live and the dead: by lease end, the live come first.
    not_stopped = list(
        running.annotate(claims_held=held).order_by("-lease_expires_at", "id")[
            : LIVE_ENGINE_LIMIT + DEAD_ENGINE_LIMIT
        ]
    )
    alive = [e for e in not_stopped if e.lease_expires_at >= cutoff][:LIVE_ENGINE_LIMIT]
    groups = {
        "live": sorted(alive, key=lambda e: (e.started_at, e.id)),
        "dead": [e for e in not_stopped if e.lease_expires_at < cutoff][:DEAD_ENGINE_LIMIT],
        "stopped": list(
            stopped.annotate(claims_held=held).order_by("-stopped_at", "id")[:STOPPED_ENGINE_LIMIT]
        ),
    }
    listed = [engine for group in groups.values() for engine in group]
    engine_rows = [engine_row(engine, now, engine_timing) for engine in listed]

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
        live_engines=live.order_by(),
        dead_engines=dead.order_by(),
        stopped_engines=stopped.order_by(),
        stuck=stuck.order_by(),
        signals=signals.order_by(),
        updates=updates.order_by(),
        suspended=recent_suspended.order_by("status", "created_at"),
        failed=recent_failed.order_by("finished_at"),
    )
    counts = capped_counts(count_queries, STATUS_COUNT_CAP, using)

    def count(key: str) -> Count_:
        return Count_(counts[key], STATUS_COUNT_CAP)

    suspended_runs = list(recent_suspended.order_by("-updated_at")[:SECTION_LIMIT])
    failed_runs = list(recent_failed.order_by("-finished_at")[:SECTION_LIMIT])
    for run in (*suspended_runs, *failed_runs):
        # Shown by the template as ``r.error_json`` (the list is also the views').
        cast(Any, run).error_json = as_json(run.error) if run.error is not None else ""
    old_signals = list(signals.order_by("id")[:SECTION_LIMIT])
    old_updates = list(updates.order_by("id")[:SECTION_LIMIT])
    messages: list[Any] = [*old_signals, *old_updates]
    for message in messages:
        message.payload_json = as_json(message.payload)
    return {
        "now": now,
        "pending_age": pending_age,
        "engines": engine_rows,
        # The last hour in charts (weft_django.admin.activity: 3 bounded statements + 1).
        "charts": activity_charts(now, engine_rows, using=using),
        "engine_counts": {group: count(f"{group}_engines") for group in groups},
        # Not listed (beyond the limit): "and N more".
        "engines_more": {
            group: max(counts[f"{group}_engines"] - len(rows), 0) for group, rows in groups.items()
        },
        "passes": pass_summaries(now, using),
        "stuck_runs": stuck_runs(
            now,
            settings.claim_ttl,
            limit=SECTION_LIMIT,
            using=using,
            live_owners=ownership_for(
                OVERVIEW_ENGINE_ID, settings, using=using, clock=lambda: now
            ).live_owners,
        ),
        "claim_ttl": settings.claim_ttl,
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
        "suspended_runs": suspended_runs,
        "suspended_count": count("suspended"),
        "failed_runs": failed_runs,
        "failed_count": count("failed"),
        "old_signals": old_signals,
        "signals_count": count("signals"),
        "old_updates": old_updates,
        "updates_count": count("updates"),
        "retention": retention_summary(using),
        # Flow control's queues (docs/flow-control.md): only when some have limits.
        "queues": [row for row in queue_overview(using=using) if row.limits.limited],
        "section_limit": SECTION_LIMIT,
        # Active runs of a workflow version no live engine serves (1 query).
        "unserved": unserved_runs([engine.workflows for engine in alive], using=using),
    }
