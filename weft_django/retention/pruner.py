"""Retention: delete finished runs (with their events, signals and update rows)
and stopped or dead engines past their retention, in bounded batches
(docs/retention.md).

Each batch is its own short transaction: the batch's run rows are locked
(``SELECT ... FOR UPDATE SKIP LOCKED`` where the database has it) and
re-checked there (still terminal, still past the cutoff), so a run that a
process is writing is skipped, never waited for. Runs are walked per status by
keyset pagination on ``weft_run_finished_idx`` (status, finished_at, id), so
each batch costs the same however many rows are finished.

Never deleted: a run that is not terminal; a finished child whose parent exists
and is not finished (the parent reads the child's result when it wakes); a
finished run whose claim still has a holder (the next pass takes it); and any
claim row: the claim row keeps the workflow id's epoch, so a purged id that is
started again is claimed at a higher epoch and a stale owner stays fenced. An
engine is deleted only when no claim, global lease row or pruner lease names
it (``Claim.holder`` and ``GlobalLease.holder`` are ``PROTECT``). Engines are
walked three ways, each keyset-paginated on an index: stopped engines by
``stopped_at`` (``ENGINES``), dead ones (lease expired, never stopped: the
process was killed) by ``lease_expires_at`` (``ENGINES`` too), and the
stopped engines of Celery passes by ``stopped_at`` (``CELERY_ENGINES``,
shorter: their summaries live in ``PassSummary``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import Exists, OuterRef, ProtectedError, Q

from ..conf import PRUNE_MAX_BATCH, check_batch_size, duration_seconds
from ..exceptions import WeftConfigurationError
from ..models import (
    TERMINAL_STATUSES,
    Claim,
    Engine,
    EngineKind,
    EngineStatus,
    GlobalLease,
    PrunerLease,
    UpdateRequest,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
    db_for,
)
from ..ownership import db_now
from .settings import RetentionPolicy, policy

#: The tables a prune deletes from, in the order it reports them.
TABLES = ("runs", "events", "signals", "updates", "engines")
#: Why a candidate run was left alone this pass.
SKIPS = ("busy", "waiting_parent", "held")


@dataclass
class PruneSummary:
    """What one prune did (or, with ``dry_run``, would do)."""

    dry_run: bool
    started_at: datetime
    cutoffs: dict[str, datetime] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    by_status: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIPS, 0))
    batches: int = 0
    complete: bool = True
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-able (timestamps as ISO 8601 strings)."""
        return {
            "dry_run": self.dry_run,
            "started_at": self.started_at.isoformat(),
            "cutoffs": {name: cutoff.isoformat() for name, cutoff in self.cutoffs.items()},
            "deleted": dict(self.deleted),
            "by_status": dict(self.by_status),
            "skipped": dict(self.skipped),
            "batches": self.batches,
            "complete": self.complete,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class Batch:
    """One batch's outcome (what the progress callback receives)."""

    target: str
    deleted: dict[str, int]
    skipped: dict[str, int]


#: On PostgreSQL, every statement of a prune runs with these planner settings
#: (``SET LOCAL``, its own transaction only): right after a bulk load, before
#: ANALYZE, the planner's estimates are tiny and it picks a bitmap scan plus a
#: sort of every matching row (a cost that grows with the backlog) for the page
#: query, or a sequential scan of the events for a batch's DELETE. Both are only
#: made expensive, not forbidden: the index paths win. JIT is off too: the
#: same poor estimates make it compile each batch's DELETE for nothing.
PG_PLANNER = (
    "SELECT set_config('enable_sort', 'off', true), set_config('enable_seqscan', 'off', true), "
    "set_config('jit', 'off', true)"
)


def guard_plans(using: str) -> None:
    """Inside a transaction on ``using``: keep a prune's statements on their indexes."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(PG_PLANNER)  # is_local: SET LOCAL, for this transaction only


def _check_seconds(value: Any, what: str, *, positive: bool) -> float:
    seconds = duration_seconds(value)
    if seconds is None or seconds < 0 or (positive and seconds == 0):
        kind = "positive" if positive else "non-negative"
        raise WeftConfigurationError(
            f"{what} must be a {kind}, finite number of seconds or a timedelta, got {value!r}."
        )
    return seconds


def _check_statuses(statuses: Sequence[str]) -> list[str]:
    terminal = [str(s) for s in TERMINAL_STATUSES]
    if isinstance(statuses, str):
        raise WeftConfigurationError("statuses must be a list of statuses, not a string.")
    bad = [s for s in statuses if s not in terminal]
    if bad:
        raise WeftConfigurationError(
            f"Only finished runs are pruned: {', '.join(map(repr, bad))} "
            f"{'is' if len(bad) == 1 else 'are'} not terminal; use {', '.join(terminal)}."
        )
    return [s for s in terminal if s in statuses]


class Pruner:
    """One prune: validated limits, then :meth:`run`. Bad input raises
    :class:`WeftConfigurationError` from the constructor, before any query."""

    def __init__(
        self,
        *,
        retention: RetentionPolicy | None = None,
        statuses: Sequence[str] | None = None,
        older_than: Any = None,
        engines: bool = True,
        batch_size: Any = None,
        time_budget: Any = None,
        dry_run: bool = False,
        on_batch: Callable[[Batch], None] | None = None,
        using: str | None = None,
    ) -> None:
        self.policy = retention if retention is not None else policy()
        self.batch_size = check_batch_size(
            self.policy.batch_size if batch_size is None else batch_size,
            "batch_size",
            maximum=PRUNE_MAX_BATCH,
        )
        self.time_budget = (
            None
            if time_budget is None
            else _check_seconds(time_budget, "time_budget", positive=True)
        )
        override = (
            None if older_than is None else _check_seconds(older_than, "older_than", positive=False)
        )
        chosen = self.policy.pruned_statuses() if statuses is None else _check_statuses(statuses)
        self.retentions: dict[str, float] = {}
        for status in chosen:
            keep = override if override is not None else self.policy.statuses.get(status)
            if keep is not None:
                self.retentions[status] = keep
        keep_engines = override if override is not None else self.policy.engines
        self.engine_retention = keep_engines if engines else None
        keep_celery = override if override is not None else self.policy.celery_engines
        self.celery_retention = keep_celery if engines else None
        self.dry_run = dry_run
        self.on_batch = on_batch
        self.using = db_for(using)
        self._began = 0.0

    def _out_of_time(self) -> bool:
        return self.time_budget is not None and time.monotonic() - self._began >= self.time_budget

    def run(self) -> PruneSummary:
        self._began = time.monotonic()
        now = db_now(self.using)
        summary = PruneSummary(dry_run=self.dry_run, started_at=now)
        for status, keep in self.retentions.items():
            cutoff = now - timedelta(seconds=keep)
            summary.cutoffs[status] = cutoff
            summary.by_status[status] = 0
            if not self._runs(status, cutoff, summary):
                summary.complete = False
                break
        engine_keeps = {"engines": self.engine_retention, "celery_engines": self.celery_retention}
        for target, engines_kept in engine_keeps.items():
            if summary.complete and engines_kept is not None:
                summary.cutoffs[target] = now - timedelta(seconds=engines_kept)
        for query, column in self._engine_walks(summary.cutoffs):
            if summary.complete:
                summary.complete = self._engines(query, column, summary)
        summary.seconds = time.monotonic() - self._began
        return summary

    # -- runs -------------------------------------------------------------------------

    def _runs(self, status: str, cutoff: datetime, summary: PruneSummary) -> bool:
        """Walk ``status`` oldest first; False when the time budget ran out."""
        runs = WorkflowRun.objects.using(self.using)
        after: tuple[datetime | None, str] | None = None  # never None: filtered on __lt
        while True:
            if self._out_of_time():
                return False
            page = runs.filter(status=status, finished_at__lt=cutoff)
            if after is not None:
                page = page.filter(
                    Q(finished_at__gt=after[0]) | Q(finished_at=after[0], id__gt=after[1])
                )
            with transaction.atomic(using=self.using):
                guard_plans(self.using)
                rows = list(
                    page.order_by("finished_at", "id").values_list("finished_at", "id")[
                        : self.batch_size
                    ]
                )
            if not rows:
                return True
            after = rows[-1]
            batch = self._run_batch(status, cutoff, [run_id for _, run_id in rows])
            summary.batches += 1
            summary.by_status[status] += batch.deleted["runs"]
            for table, count in batch.deleted.items():
                summary.deleted[table] += count
            for why, count in batch.skipped.items():
                summary.skipped[why] += count
            if self.on_batch is not None:
                self.on_batch(batch)
            if len(rows) < self.batch_size:
                return True

    def _run_batch(self, status: str, cutoff: datetime, ids: list[str]) -> Batch:
        skipped = dict.fromkeys(SKIPS, 0)
        runs = WorkflowRun.objects.using(self.using)
        with transaction.atomic(using=self.using):
            guard_plans(self.using)
            locked = runs.filter(pk__in=ids, status=status, finished_at__lt=cutoff)
            if not self.dry_run:
                features = connections[self.using].features
                locked = locked.select_for_update(
                    skip_locked=features.has_select_for_update_skip_locked
                )
            rows = dict(locked.values_list("id", "parent_id"))
            skipped["busy"] = len(ids) - len(rows)
            parents = {parent for parent in rows.values() if parent}
            if parents:
                waiting = set(
                    runs.filter(pk__in=parents)
                    .exclude(status__in=TERMINAL_STATUSES)
                    .values_list("id", flat=True)
                )
                keep = [run_id for run_id, parent in rows.items() if parent in waiting]
                skipped["waiting_parent"] = len(keep)
                for run_id in keep:
                    del rows[run_id]
            held = set(
                Claim.objects.using(self.using)
                .filter(workflow_id__in=list(rows), holder__isnull=False)
                .values_list("workflow_id", flat=True)
            )
            skipped["held"] = len(held & rows.keys())
            doomed = [run_id for run_id in rows if run_id not in held]
            deleted = self._delete_runs(doomed)
        return Batch(status, deleted, skipped)

    def _delete_runs(self, ids: list[str]) -> dict[str, int]:
        """Delete the runs ``ids`` and their rows (a dry run only counts them)."""
        deleted = dict.fromkeys(TABLES, 0)
        if not ids:
            return deleted
        children = {
            "events": WorkflowEvent,
            "signals": WorkflowSignal,
            "updates": UpdateRequest,
        }
        for table, model in children.items():
            rows = model._default_manager.using(self.using).filter(run_id__in=ids)
            # No signals and no relations below them: each is one DELETE statement.
            deleted[table] = rows.count() if self.dry_run else rows.delete()[0]
        runs = WorkflowRun.objects.using(self.using).filter(pk__in=ids)
        # The run's own rows are gone already: a raw DELETE, without the collector's
        # SELECT of every run row and its empty cascade queries.
        deleted["runs"] = runs.count() if self.dry_run else runs._raw_delete(self.using)
        return deleted

    # -- engines ----------------------------------------------------------------------

    def _engine_walks(self, cutoffs: dict[str, datetime]) -> list[tuple[Q, str]]:
        """(which engines, the column walked) for each engine retention in ``cutoffs``:
        stopped and dead engines past ``ENGINES``, stopped Celery ones past
        ``CELERY_ENGINES``."""
        walks: list[tuple[Q, str]] = []
        if "engines" in cutoffs:
            cutoff = cutoffs["engines"]
            walks.append((Q(status=EngineStatus.STOPPED, stopped_at__lt=cutoff), "stopped_at"))
            dead = Q(status__in=(EngineStatus.RUNNING, EngineStatus.DISPOSING))
            walks.append((dead & Q(lease_expires_at__lt=cutoff), "lease_expires_at"))
        if "celery_engines" in cutoffs:
            stopped = Q(status=EngineStatus.STOPPED, kind=EngineKind.CELERY)
            walks.append((stopped & Q(stopped_at__lt=cutoffs["celery_engines"]), "stopped_at"))
        return walks

    def _engines(self, query: Q, column: str, summary: PruneSummary) -> bool:
        """The engines of ``query`` that nothing names, oldest ``column`` first."""
        after: tuple[datetime | None, str] | None = None  # never None: filtered on __lt
        while True:
            if self._out_of_time():
                return False
            page = Engine.objects.using(self.using).filter(query)
            if after is not None:
                page = page.filter(
                    Q(**{f"{column}__gt": after[0]}) | Q(**{column: after[0], "id__gt": after[1]})
                )
            rows = list(page.order_by(column, "id").values_list(column, "id")[: self.batch_size])
            if not rows:
                return True
            after = rows[-1]
            deleted, busy = self._engine_batch(query, [engine_id for _, engine_id in rows])
            summary.batches += 1
            summary.deleted["engines"] += deleted
            summary.skipped["busy"] += busy
            if self.on_batch is not None:
                counts = dict.fromkeys(TABLES, 0)
                counts["engines"] = deleted
                self.on_batch(Batch("engines", counts, {"busy": busy}))
            if len(rows) < self.batch_size:
                return True

    def _engine_batch(self, query: Q, ids: list[str]) -> tuple[int, int]:
        free = (
            Engine.objects.using(self.using)
            .filter(query, pk__in=ids)
            .exclude(Exists(Claim.objects.filter(holder=OuterRef("pk"))))
            .exclude(Exists(GlobalLease.objects.filter(holder=OuterRef("pk"))))
            .exclude(Exists(PrunerLease.objects.filter(holder=OuterRef("pk"))))
        )
        if self.dry_run:
            with transaction.atomic(using=self.using):
                guard_plans(self.using)
                count = free.count()
            return count, len(ids) - count
        try:
            with transaction.atomic(using=self.using):
                guard_plans(self.using)
                victims = list(free.values_list("id", flat=True))
                # The collector checks the PROTECT relations once more inside the
                # transaction: a claim that appeared meanwhile is ProtectedError.
                deleted = Engine.objects.using(self.using).filter(pk__in=victims).delete()[1]
        except ProtectedError:
            return 0, len(ids)
        count = deleted.get(Engine._meta.label, 0)
        return count, len(ids) - count


def prune(*, using: str | None = None, **options: Any) -> PruneSummary:
    """Prune once with ``options`` (see :class:`Pruner`); returns the summary."""
    return Pruner(using=using, **options).run()
