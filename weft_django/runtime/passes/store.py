"""Store-wide passes for a short-lived engine: the Celery beat tasks' signal and
update polls (docs/celery.md).

A worker's own passes 3 and 4 only look at the runs it holds. These look at
every run of the store with a buffered signal it waits for (or a pending
update request) and:

* a run whose owner is live gets a wake hint and a ``NOTIFY``
  (``owner_notified``): the owner applies it itself;
* a run with no live owner is taken by the reclaim scan's rules (the
  ownership strategy's ``take_stranded``), driven to its next park point, so
  the signal or update is applied, then **released** (``drained``): the
  engine has no renewal loop, so it keeps no claim. A worker's reclaim scan
  takes the run later;
* one run's failure is ``drain_failed`` with its error and never stops the
  others; losing the run to someone else is ``lost_race``.

Each pass is one engine (an ``Engine`` row of kind ``celery``): registered at
the start, its summary stored on its row, every claim released and the row
marked stopped at the end, also when the pass raises. The pass's summary is
also upserted into its kind's ``PassSummary`` row (one row per pass kind:
:mod:`.pass_summaries`), which the admin overview shows; the stopped engine
rows themselves are not listed there and retention deletes them early. A pass selects at most
``limits.batch_size`` runs and starts no new run once ``limits.time_budget``
has passed (those left are ``deferred`` to the next pass).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import DatabaseError
from django.utils import timezone

from ...conf import PassLimits, WeftSettings
from ...exceptions import DrainError
from ...models import EngineKind, PassKind
from ...ownership import (
    Outcome,
    PassResult,
    has_buffered_signal,
    has_pending_update,
    metrics,
    record_passes,
    signal_stranded,
    update_stranded,
)
from .. import registry, wakeups
from ..engine import TurnOutcome, WorkflowEngine
from . import summaries as pass_summaries

logger = logging.getLogger("weft_django.store_passes")


#: Turns that applied the signal or update: the run parked again, or ended.
DRAINED_TURNS = frozenset(
    {TurnOutcome.PARKED, TurnOutcome.COMPLETED, TurnOutcome.FAILED, TurnOutcome.TIMED_OUT}
)
#: Turns that found the run changed under us (finished, purged, revoked).
RACED_TURNS = frozenset(
    {TurnOutcome.MISSING, TurnOutcome.TERMINAL, TurnOutcome.DEPOSED, TurnOutcome.NOT_HELD}
)


@dataclass(frozen=True)
class StoreScan:
    """One store-wide pass: its name, how it selects runs, its post-win re-check,
    and the ``PassSummary`` row it records into."""

    name: str
    select: Callable[..., list[tuple[str, str]]]
    still_wanted: Callable[..., bool]
    kind: str = ""


SIGNAL_POLL = StoreScan(
    "signal_poll_pass", signal_stranded, has_buffered_signal, PassKind.SIGNAL_POLL
)
UPDATE_POLL = StoreScan(
    "update_poll_pass", update_stranded, has_pending_update, PassKind.UPDATE_POLL
)


def run_store_pass(
    scan: StoreScan,
    limits: PassLimits,
    *,
    settings: WeftSettings | None = None,
    using: str | None = None,
) -> dict[str, Any]:
    """Run ``scan`` once as a short-lived engine; returns the pass's JSON-able summary.

    The boot gates of the configured mode run first (a marker mismatch raises
    ``OwnershipModeMismatchError`` having written nothing).
    """
    engine = WorkflowEngine(kind=EngineKind.CELERY, settings=settings, using=using)
    try:
        engine.start()
        result = PassResult(scan.name, started_at=engine.now())
    except Exception as exc:
        if scan.kind:  # the pass never ran: its row says why
            now = timezone.now()
            pass_summaries.record_pass(
                scan.kind, started_at=now, finished_at=now, counts={}, error=exc, using=using
            )
        raise
    error: BaseException | None = None
    try:
        StorePass(engine, scan, limits).run(result)
    except BaseException as exc:
        error = exc
        raise
    finally:
        _close(engine, result.done(), scan.kind, error)
    return result.summary(engine.engine_id)


def _close(
    engine: WorkflowEngine, result: PassResult, kind: str, error: BaseException | None
) -> None:
    """Record the summary on the engine row and in ``kind``'s ``PassSummary`` row,
    release everything, mark the engine stopped. Runs also when the pass raised:
    errors here are logged, not raised over it."""
    metrics.observe_pass(result)
    summary = result.summary(engine.engine_id)
    try:
        record_passes(engine.engine_id, {result.name: summary}, using=engine.using)
    except DatabaseError as exc:
        logger.warning("%s: could not record the summary: %s", result.name, exc)
    if kind:
        finished_at = result.finished_at or result.started_at
        pass_summaries.record_store_pass(
            kind,
            summary,
            started_at=result.started_at,
            finished_at=finished_at,
            error=error,
            using=engine.using,
        )
    try:
        engine.shutdown()
    except DatabaseError as exc:
        logger.error(
            "%s: could not stop engine %s (its lease expires by itself): %s",
            result.name,
            engine.engine_id,
            exc,
        )


class StorePass:
    """One pass of ``scan`` by ``engine`` (a started engine of kind ``celery``)."""

    def __init__(self, engine: WorkflowEngine, scan: StoreScan, limits: PassLimits) -> None:
        self.engine = engine
        self.ownership = engine.ownership
        self.scan = scan
        self.limits = limits
        self.using = engine.using
        self._began = time.monotonic()
        self._beat = self._began

    def _out_of_time(self) -> bool:
        return time.monotonic() - self._began >= self.limits.time_budget

    def _heartbeat(self) -> None:
        """Keep the engine's lease (which its claim rides on) well ahead of a long pass."""
        if time.monotonic() - self._beat >= self.ownership.timing.renew_interval:
            self.ownership.heartbeat()
            self._beat = time.monotonic()

    def run(self, result: PassResult) -> None:
        names = registry.served()
        candidates = self.scan.select(names, limit=self.limits.batch_size, using=self.using)
        owners = self.ownership.live_owners([run_id for run_id, _ in candidates])
        owned = [run_id for run_id, _ in candidates if owners.get(run_id)]
        self._hint(owned, Outcome.OWNER_NOTIFIED, result)
        later: dict[str, Outcome] = {}
        for run_id, workflow_name in candidates:
            if run_id in owners:
                continue
            if self._out_of_time() or self.engine.stopping.is_set():
                result.record(run_id, Outcome.DEFERRED)
                continue
            outcome, error = self._one(run_id, workflow_name, names)
            if outcome in (Outcome.OWNER_NOTIFIED, Outcome.HINT_LEFT):
                later[run_id] = outcome
            result.record(run_id, outcome, error)
            self._heartbeat()
        for outcome in (Outcome.OWNER_NOTIFIED, Outcome.HINT_LEFT):
            self._hint([r for r, o in later.items() if o is outcome], outcome, result)

    def _hint(self, run_ids: list[str], outcome: Outcome, result: PassResult) -> None:
        if not run_ids:
            return
        try:
            wakeups.hint(run_ids, using=self.using)
        except DatabaseError as exc:
            logger.warning("%s: could not hint %d run(s): %s", self.scan.name, len(run_ids), exc)
            for run_id in run_ids:
                result.record(run_id, Outcome.DRAIN_FAILED, exc)
            return
        for run_id in run_ids:
            result.record(run_id, outcome)

    def _one(
        self, run_id: str, workflow_name: str, names: Collection[str]
    ) -> tuple[Outcome, BaseException | None]:
        try:
            taken = self.ownership.take_stranded(
                run_id,
                workflow_name=workflow_name,
                names=names,
                still_wanted=partial(self.scan.still_wanted, using=self.using),
            )
        except DatabaseError as exc:
            logger.warning("%s: could not take %s: %s", self.scan.name, run_id, exc)
            return Outcome.DRAIN_FAILED, exc
        if taken is Outcome.NOT_EXPIRED:
            return Outcome.OWNER_NOTIFIED, None  # its owner renewed after our read
        if taken is not Outcome.ACQUIRED:
            return taken, None
        return self._drain(run_id)

    def _drain(self, run_id: str) -> tuple[Outcome, BaseException | None]:
        """Drive the run to its next park point, then release it, whatever happened."""
        try:
            turn = self.engine.drive(run_id)
        except Exception as exc:
            logger.exception("%s: driving %s failed", self.scan.name, run_id)
            return Outcome.DRAIN_FAILED, exc
        finally:
            self._release(run_id)
        if turn in DRAINED_TURNS:
            return Outcome.DRAINED, None
        if turn in RACED_TURNS:
            return Outcome.LOST_RACE, None
        detail = "see the log" if turn is TurnOutcome.ABANDONED else "the run is left as it is"
        error = DrainError(f"the turn of {run_id} ended {turn.value} ({detail})")
        return Outcome.DRAIN_FAILED, error

    def _release(self, run_id: str) -> None:
        try:
            self.engine.release(run_id)
        except DatabaseError as exc:
            # Kept until the engine's lease expires; a worker's reclaim scan takes it then.
            logger.warning("%s: could not release %s: %s", self.scan.name, run_id, exc)
