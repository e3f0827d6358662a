"""The ownership strategy interface: everything that differs between ownership modes.

An engine gets one :class:`Ownership` at construction, from
:func:`weft_django.ownership.modes.ownership_for`, chosen by
``WEFT["OWNERSHIP"]`` the way Django chooses a database backend once from
``ENGINE``. Nothing above this layer asks which mode is configured: the
runtime fences its writes, the worker selects, claims and recovers runs, and
the passes find the runs this engine holds, all through these methods.
Adding a mode means adding one subclass and naming it in the factory.

Error contract, for every implementation:

* No transition raises because it lost a race. ``acquire`` returns a
  :data:`~weft_django.ownership.claims.results.ClaimResult`; selection methods return
  what they won and skip the rest.
* :meth:`Ownership.fenced` raises :class:`~weft_django.exceptions.EngineDeposedError`
  when this engine no longer owns the run; the whole transaction is rolled
  back. The one-statement forms return ``False`` for the same case (nothing
  written). Which of them a strategy has it says once, in
  :attr:`Ownership.one_statement`; asked for one it does not have, it raises
  :class:`~weft_django.ownership.writes.requests.NoOneStatementForm` (the
  caller checks first, and uses :meth:`~Ownership.fenced` instead).
* Database errors propagate (``django.db.DatabaseError``): the host decides
  whether to retry, and the claim is kept.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import ClassVar

from ...conf import WORKFLOW_LEASE, Timing, WeftSettings
from ...exceptions import WeftSecondEngineWarning, warn
from ...models import Engine, EngineKind, db_for
from ..claims.registry import ClaimRegistry
from ..claims.results import ClaimResult
from ..clock import Clock, db_now
from ..gates import run_boot_gates
from ..leases.engines import register_engine
from ..leases.state import live_engines
from ..passes.outcomes import Outcome, PassResult
from ..passes.reclaim import acquire_stranded
from ..writes.requests import (
    Checkpoint,
    Fence,
    Finish,
    Form,
    NoOneStatementForm,
    Park,
    SignalTake,
    TakeSignal,
)

#: The one-statement forms of a strategy that has none (mode ``lease``).
NO_FORMS: frozenset[Form] = frozenset()


class Ownership(abc.ABC):
    """How one engine owns the runs it drives, in one ownership mode."""

    #: The value of ``WEFT["OWNERSHIP"]`` that selects this class.
    name: ClassVar[str]
    #: Whether engines of this mode establish or match the store-wide marker.
    uses_marker: ClassVar[bool] = True
    #: At most this many live engines may share a store in this mode (None: any).
    max_live_engines: ClassVar[int | None] = None
    #: Whether a short-lived engine (a Celery task: no renewal loop) may take,
    #: drive and release runs in this mode (see :meth:`take_stranded`).
    short_lived_drives: ClassVar[bool] = False

    def __init__(
        self,
        engine_id: str,
        settings: WeftSettings,
        *,
        using: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.engine_id = engine_id
        self.settings = settings
        self.using = db_for(using)
        self.timing = self.timing_of(settings)
        self._clock = clock
        # Per-run claims: the fencing tokens of modes workflow-lease and none. In
        # mode lease nothing is claimed through it, but it still renews the
        # engine's own row.
        self.claims = ClaimRegistry(engine_id, timing=self.timing, using=self.using, clock=clock)

    # -- the mode's settings and checks -------------------------------------------

    @classmethod
    @abc.abstractmethod
    def timing_of(cls, settings: WeftSettings) -> Timing:
        """The TTL and renew interval that time this mode's leases."""

    @classmethod
    def crowd(cls, settings: WeftSettings, *, using: str | None = None) -> list[Engine]:
        """The live engines, when more share the store than this mode allows (the
        system check ``weft.W001``); empty otherwise."""
        if cls.max_live_engines is None:
            return []
        engines = live_engines(using=using, timing=cls.timing_of(settings))
        if not cls.short_lived_drives:
            # A Celery task's engine that may not drive only leaves wake hints:
            # it is no second driver.
            engines = engines.exclude(kind=EngineKind.CELERY)
        live = list(engines)
        return live if len(live) > cls.max_live_engines else []

    def warn_if_crowded(self) -> None:
        """At a worker's boot: warn when this engine is one too many."""
        others = [
            e.id for e in self.crowd(self.settings, using=self.using) if e.id != self.engine_id
        ]
        if others:
            warn(
                WeftSecondEngineWarning(
                    f"Ownership mode {self.name!r} allows one worker only, but other live "
                    f"engines share this database: {', '.join(others)}. Runs may execute "
                    f"twice; use {WORKFLOW_LEASE!r}."
                )
            )

    # -- lifecycle ----------------------------------------------------------------

    def now(self) -> datetime:
        return self._clock() if self._clock is not None else db_now(self.using)

    def boot(self, *, kind: str, workflows: dict[str, list[int]] | None = None) -> None:
        """Pass the boot gates, then register this engine's row (with the
        workflows it serves: ``name -> versions``)."""
        if self.uses_marker:
            run_boot_gates(self.settings, using=self.using, engine_id=self.engine_id)
        register_engine(
            self.settings,
            timing=self.timing,
            kind=kind,
            engine_id=self.engine_id,
            using=self.using,
            now=self._clock() if self._clock is not None else None,
            workflows=workflows,
        )

    @property
    def disposing(self) -> bool:
        """Set when the engine stops: no transition may take a new claim."""
        return self.claims.disposing

    def dispose(self) -> None:
        self.claims.disposing = True

    @abc.abstractmethod
    def renew(self) -> PassResult:
        """Pass 1: keep this engine's leases alive; report what was lost."""

    @abc.abstractmethod
    def release_all(self) -> int:
        """At shutdown: give up everything held (epochs unchanged); how many claims."""

    # -- one run ------------------------------------------------------------------

    def can_drive(self) -> bool:
        """Whether this engine may drive runs at all right now."""
        return True

    @abc.abstractmethod
    def acquire(self, run_id: str) -> ClaimResult:
        """Claim ``run_id`` (acquire, re-adopt or take over after expiry)."""

    @abc.abstractmethod
    def release(self, run_id: str, *, ended: bool = False) -> None:
        """Give a claim up, epoch unchanged (not held: nothing happens). ``ended``:
        the run is finished, suspended or gone, so nothing should take it (the
        release rule, :mod:`weft_django.ownership.claims.release`)."""

    @abc.abstractmethod
    def fence_epoch(self, run_id: str) -> int | None:
        """The epoch this engine's writes to ``run_id`` are fenced on (None: not held)."""

    @abc.abstractmethod
    def check_wake(self, run_id: str, wake_kind: str) -> bool:
        """Before driving ``run_id`` for a wake: does the store agree we own it?"""

    def forget(self, run_id: str, epoch: int | None = None) -> bool:
        """Drop local state for a run that ended, or was lost (only at ``epoch``)."""
        return self.claims.forget(run_id, epoch)

    # -- fenced writes --------------------------------------------------------------

    def fence_for(self, run_id: str, epoch: int) -> Fence:
        """The fencing token of this engine's writes to ``run_id`` at ``epoch``."""
        return Fence(run_id, self.engine_id, epoch)

    @abc.abstractmethod
    @contextmanager
    def fenced(self, fence: Fence) -> Iterator[None]:
        """A transaction whose writes commit only while ``fence`` holds."""

    @property
    def one_statement(self) -> frozenset[Form]:
        """The writes this strategy has in one statement (on its database), each
        one of the methods below; the caller writes the others in :meth:`fenced`.
        Here: none."""
        return NO_FORMS

    def insert_fenced(self, fence: Fence, checkpoint: Checkpoint) -> bool:
        """A step's checkpoint as one statement (:data:`Form.CHECKPOINT`, or
        ``CHECKPOINT_RUNNING`` when it marks the run running; see
        :func:`~weft_django.ownership.writes.single.fenced_insert`): False when
        ``fence`` did not hold."""
        raise NoOneStatementForm(checkpoint.form, f"mode {self.name!r}")

    def finish_fenced(self, fence: Fence, finish: Finish) -> bool:
        """The terminal commit as one statement (see
        :func:`~weft_django.ownership.writes.single.fenced_finish`)."""
        raise NoOneStatementForm(finish.form, f"mode {self.name!r}")

    def park_fenced(self, fence: Fence, park: Park) -> bool:
        """Parking as one statement (see
        :func:`~weft_django.ownership.writes.single.fenced_write_many`)."""
        raise NoOneStatementForm(park.form, f"mode {self.name!r}")

    def take_signal_fenced(self, fence: Fence, take: TakeSignal) -> SignalTake:
        """Consume a signal and record it as one fenced statement (see
        :func:`~weft_django.ownership.writes.wake.fenced_take_signal`)."""
        raise NoOneStatementForm(take.form, f"mode {self.name!r}")

    @abc.abstractmethod
    def release_in_commit(self, fence: Fence) -> None:
        """Inside a terminal or suspend commit: the claim's release, in that transaction."""

    # -- selection ------------------------------------------------------------------

    @abc.abstractmethod
    def due_runs(self, now: datetime, names: Collection[str], *, limit: int) -> list[str]:
        """Runs this engine holds that have a wake hint or a due timer (with per-run
        claims, also the released runs of ``names`` that are due: taken here)."""

    @abc.abstractmethod
    def claim_pending(self, now: datetime, names: Collection[str], capacity: int) -> list[str]:
        """Claim up to ``capacity`` due pending runs of ``names``; the ids won."""

    @abc.abstractmethod
    def held_runs(self, names: Collection[str]) -> list[str]:
        """The started runs this engine owns now (the signal and update polls)."""

    @abc.abstractmethod
    def held_count(self) -> int:
        """How many runs this engine holds claims on."""

    @abc.abstractmethod
    def held_with_buffered_signal(self, names: Collection[str]) -> list[str]:
        """Pass 3's probe: the held runs that wait on a signal which is buffered.
        Its cost follows the buffered signals, not the runs held (on a database
        with partial indexes). Errors: a ``DatabaseError`` propagates."""

    @abc.abstractmethod
    def held_with_pending_updates(self, names: Collection[str]) -> list[str]:
        """Pass 4's probe: the held runs with a pending update request; its cost
        follows the pending requests. Errors: a ``DatabaseError`` propagates."""

    # -- recovery ---------------------------------------------------------------------

    @abc.abstractmethod
    def recover(
        self,
        names: Collection[str],
        drive: Callable[[str], bool],
        busy: Callable[[str], bool],
    ) -> PassResult:
        """Pass 2: find runs stranded by other engines and hand them to ``drive``."""

    # -- short-lived engines (the store-wide passes of Celery tasks) ------------------

    @abc.abstractmethod
    def live_owners(self, run_ids: list[str]) -> dict[str, str]:
        """Run id -> engine id, for those of ``run_ids`` owned by an engine whose
        lease is live on the database clock."""

    def take_stranded(
        self,
        run_id: str,
        *,
        workflow_name: str | None,
        names: Collection[str],
        still_wanted: Callable[[str], bool],
    ) -> Outcome:
        """For a short-lived engine: take ``run_id``, which no live engine owns, so
        that it can be driven once and released. ``still_wanted(run_id)`` is the
        post-win re-check (it must imply that the run is still active).

        Returns ``acquired`` when taken (the caller drives it, then releases it),
        ``not_expired`` when its owner turned out to be live, ``hint_left`` when a
        short-lived engine may not drive runs in this mode
        (:attr:`short_lived_drives` is false: the caller leaves a wake hint for
        the next owner), or the reason it was not taken (``not_eligible``,
        ``lost_race``, ``backoff_skipped``). Where it may, the run's claim is
        taken by the reclaim scan's rules (registered type, up to 5 attempts,
        post-win re-check) and fenced like any other.
        """
        if not self.short_lived_drives:
            return Outcome.HINT_LEFT
        return acquire_stranded(
            self.claims,
            run_id,
            workflow_name=workflow_name,
            names=names,
            still_wanted=still_wanted,
        )

    def heartbeat(self) -> None:
        """Extend this engine's own lease (one UPDATE of its row) without taking
        anything: a short-lived engine calls it between runs."""
        self.claims.renew()
