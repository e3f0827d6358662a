"""The schedule-firing pass (docs/schedules.md): under the schedule lease,
start each due tick's run exactly once.

Each tick starts the run ``schedule:<name>:<UTC ISO time>`` through
:func:`weft_django.api.runs.start`, in one transaction with the lease's fence
(a conditional renewal at this engine's token, which locks the lease row) and
the schedule row's conditional update (its ``next_tick`` as read). So:

* a second firing of a tick (two firers, a retried pass) is refused by the
  run's unique id: a harmless duplicate, counted and ignored;
* a firer deposed while frozen fails the fence and its insert rolls back;
* a takeover waits on the lease row until a firing in flight commits, and
  then reads the schedule row that firing advanced.

Ticks are judged on the database's clock. A tick counts as on time until the
takeover bound (``CLAIM_TTL + 3 x CLAIM_RENEW_INTERVAL``) has passed; after
that it is late, and the catch-up policy decides: ``skip`` drops late ticks,
``latest`` fires only the most recent due tick, ``all`` fires every due tick
(at most ``max_catch_up``, the most recent ones). The overlap policy decides
what a tick does while the schedule's previous run is unfinished: ``allow``
fires it, ``skip`` drops it, ``queue`` holds one tick back (``queued_tick``)
and fires it once that run is terminal (more ticks meanwhile are dropped).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from ..api.runs import start
from ..conf import Timing
from ..exceptions import WeftError, WorkflowAlreadyExistsError
from ..models import TERMINAL_STATUSES, Schedule, WorkflowRun, db_for
from ..ownership import Clock
from . import metrics
from .cron import tick_id
from .declare import ScheduleSpec, declared
from .lease import ScheduleLeaseManager

logger = logging.getLogger("weft_django.schedules")


class LeaseLost(WeftError):
    """The schedule lease was lost (fence refused): the firing is rolled back."""


class RowChanged(WeftError):
    """The schedule row changed since it was read (paused, resumed, re-synced)."""


@dataclass
class FireSummary:
    """What one pass did: run ids started, and ticks by outcome."""

    started: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    skipped: int = 0
    queued: int = 0
    late: int = 0
    errors: int = 0
    lease_lost: bool = False


def sync(specs: dict[str, ScheduleSpec], now: datetime, *, using: str | None = None) -> int:
    """Create the rows of new schedules and refresh the declared fields of the
    others; a changed cron or time zone restarts from the next tick after
    ``now``. Returns the rows written."""
    alias = db_for(using)
    rows = {row.name: row for row in Schedule.objects.using(alias).filter(name__in=list(specs))}
    written = 0
    for name, spec in specs.items():
        cron = spec.parsed()
        fields: dict[str, Any] = {
            "workflow_name": spec.workflow_name,
            "cron": cron.expression,
            "timezone": cron.timezone,
            "catch_up": spec.catch_up,
            "overlap": spec.overlap,
        }
        row = rows.get(name)
        if row is None:
            try:
                with transaction.atomic(using=alias):
                    Schedule.objects.using(alias).create(
                        name=name, next_tick=cron.after(now), **fields
                    )
                written += 1
            except IntegrityError:
                pass  # another engine created it first
            continue
        unchanged = all(getattr(row, key) == value for key, value in fields.items())
        if unchanged and row.next_tick is not None:
            continue
        if (row.cron, row.timezone) != (cron.expression, cron.timezone) or row.next_tick is None:
            fields.update(next_tick=cron.after(now), queued_tick=None)
        written += Schedule.objects.using(alias).filter(pk=row.pk).update(**fields)
    return written


class Firer:
    """One engine's schedule-firing pass: :meth:`once` takes (or renews) the lease
    and fires what is due. ``clock`` (tests) replaces the database's clock."""

    def __init__(
        self,
        engine_id: str,
        timing: Timing,
        *,
        using: str | None = None,
        clock: Clock | None = None,
        specs: Callable[[], dict[str, ScheduleSpec]] = declared,
    ) -> None:
        self.using = db_for(using)
        self.timing = timing
        self.lease = ScheduleLeaseManager(engine_id, timing, using=self.using, clock=clock)
        self.specs = specs
        self._synced_token: int | None = None
        self._names: frozenset[str] = frozenset()

    @property
    def late_after(self) -> timedelta:
        """The takeover bound: a tick fired later than this after its time is late."""
        return timedelta(seconds=self.timing.ttl + 3 * self.timing.renew_interval)

    def once(self) -> FireSummary | None:
        """One pass; None when another engine holds the lease."""
        was_held = self.lease.held
        # A holder whose lease lapsed (frozen past it) takes it again when it is free.
        if not self.lease.try_acquire() and not (was_held and self.lease.try_acquire()):
            return None
        specs = self.specs()
        self._names = frozenset(specs)
        now = self.lease.now()
        if self._synced_token != self.lease.token:  # just acquired: sync first
            sync(specs, now, using=self.using)
            self._synced_token = self.lease.token
        summary = FireSummary()
        rows = Schedule.objects.using(self.using).filter(name__in=list(specs), paused=False)
        for row in rows.order_by("name"):
            try:
                self._fire_schedule(specs[row.name], row, now, summary)
            except LeaseLost:
                logger.warning("schedules: the schedule lease was lost; stopped firing")
                summary.lease_lost = True
                break
            except RowChanged:
                continue  # paused or re-synced meanwhile: the next pass reads it again
            except WeftError as exc:
                summary.errors += 1
                metrics.errors.labels(schedule=row.name).inc()
                logger.error("schedule %s: could not fire: %s", row.name, exc)
        return summary

    def next_due(self) -> datetime | None:
        """The earliest next tick of a declared, unpaused schedule (a queued tick
        waits on its previous run, which the pass checks every renew interval)."""
        rows = Schedule.objects.using(self.using).filter(
            paused=False, name__in=list(self._names), next_tick__isnull=False
        )
        return rows.order_by("next_tick").values_list("next_tick", flat=True).first()

    # -- one schedule ----------------------------------------------------------------

    def _fire_schedule(
        self, spec: ScheduleSpec, row: Schedule, now: datetime, summary: FireSummary
    ) -> None:
        cron = spec.parsed()
        if row.queued_tick is not None and not self._unfinished(row.last_run_id):
            self._commit(spec, row, row.queued_tick, now, summary, fire=True, dequeue=True)
        if row.next_tick is None or row.next_tick > now:
            return
        limit = spec.max_catch_up if spec.catch_up == "all" else 1
        ticks, earlier = cron.latest(now, since=row.next_tick, limit=limit)
        skipped = earlier
        if spec.catch_up == "skip":
            on_time = [tick for tick in ticks if now - tick <= self.late_after]
            skipped += len(ticks) - len(on_time)
            ticks = on_time
        if skipped:
            summary.skipped += skipped
            metrics.skipped.labels(
                schedule=spec.name, reason="late" if spec.catch_up == "skip" else "catch_up"
            ).inc(skipped)
            logger.info(
                "schedule %s: %d missed tick(s) skipped (catch_up=%s)",
                spec.name,
                skipped,
                spec.catch_up,
            )
        after_all = cron.after(now)
        if not ticks:
            self._advance(row, after_all)
            return
        for index, tick in enumerate(ticks):
            next_tick = ticks[index + 1] if index + 1 < len(ticks) else after_all
            self._commit(spec, row, tick, now, summary, next_tick=next_tick)

    def _unfinished(self, run_id: str) -> bool:
        if not run_id:
            return False
        runs = WorkflowRun.objects.using(self.using).filter(pk=run_id)
        return runs.exclude(status__in=TERMINAL_STATUSES).exists()

    def _advance(self, row: Schedule, next_tick: datetime | None) -> None:
        with transaction.atomic(using=self.using):
            if not self.lease.fence():
                raise LeaseLost("schedule lease lost")
            self._update(row, next_tick=next_tick)

    def _update(self, row: Schedule, **fields: Any) -> None:
        """The row's conditional update: as read, and still unpaused."""
        rows = Schedule.objects.using(self.using).filter(
            pk=row.pk, paused=False, next_tick=row.next_tick, queued_tick=row.queued_tick
        )
        if rows.update(**fields) != 1:
            raise RowChanged(row.name)
        for key, value in fields.items():
            setattr(row, key, value)

    def _commit(
        self,
        spec: ScheduleSpec,
        row: Schedule,
        tick: datetime,
        now: datetime,
        summary: FireSummary,
        *,
        next_tick: datetime | None = None,
        fire: bool = False,
        dequeue: bool = False,
    ) -> None:
        """One tick in one fenced transaction: fire it, queue it or skip it."""
        fields: dict[str, Any] = {} if dequeue else {"next_tick": next_tick}
        if dequeue:
            fields["queued_tick"] = None
        elif spec.overlap != "allow" and self._unfinished(row.last_run_id):
            if spec.overlap == "queue" and row.queued_tick is None:
                fields["queued_tick"] = tick
                summary.queued += 1
            else:
                summary.skipped += 1
                metrics.skipped.labels(schedule=spec.name, reason="overlap").inc()
        else:
            fire = True
        run_id = tick_id(spec.name, tick)
        duplicate = False
        with transaction.atomic(using=self.using):
            if not self.lease.fence():
                raise LeaseLost("schedule lease lost")
            if fire:
                workflow, args, kwargs = spec.call()  # a task: django.tasks.<queue>
                try:
                    start(workflow, *args, workflow_id=run_id, using=self.using, **kwargs)
                except WorkflowAlreadyExistsError:
                    duplicate = True
                fields.update(last_tick=tick, last_fired_at=now, last_run_id=run_id)
            self._update(row, **fields)
        if not fire:
            return
        if duplicate:
            summary.duplicates.append(run_id)
            metrics.duplicates.labels(schedule=spec.name).inc()
            return
        summary.started.append(run_id)
        metrics.fired.labels(schedule=spec.name).inc()
        if now - tick > self.late_after:
            summary.late += 1
            metrics.late.labels(schedule=spec.name).inc()
        logger.info("schedule %s: tick %s started run %s", spec.name, tick.isoformat(), run_id)
