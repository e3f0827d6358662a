"""Run workflows in-process in your own tests, the way Celery's eager mode does.

::

    from weft_django.testing import WorkflowDriver

    def test_order_is_approved(db):
        driver = WorkflowDriver()
        handle = weft.start("shop.approve_order", 42, workflow_id="order-42")
        driver.run_until_idle()                 # runs until it waits for "decision"
        weft.signal("order-42", "decision", {"status": "approved"})
        driver.run_until_idle()
        driver.advance(timedelta(minutes=5))    # fire the durable timer
        assert handle.result(timeout=0) == {"status": "approved"}

The driver is a real engine (gates, engine row, claims, fenced writes) of
kind ``test``; it only decides *when* to drive: until nothing is runnable.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Q

from .models import Claim, EngineKind, WorkflowRun, db_for
from .ownership import (
    Acquired,
    expired_holders,
    held_woken,
    ownerless_active,
    pending_due,
    pending_due_filter,
)
from .runtime.engine import PROGRESS, WorkflowEngine


class WorkflowDriver:
    """An in-process engine that drives every runnable run until none is left."""

    def __init__(self, *, engine: WorkflowEngine | None = None) -> None:
        self.engine = engine or WorkflowEngine(kind=EngineKind.TEST)
        if not self.engine.started:
            self.engine.start()

    def advance(self, delta: float | timedelta) -> None:
        """Move the driver's timer clock forward, then run what became due."""
        seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
        self.engine.time_offset += timedelta(seconds=seconds)
        self.run_until_idle()

    def _candidates(self) -> list[str]:
        engine = self.engine
        now = engine.now()
        cutoff = engine.ownership.timing.cutoff(now - engine.time_offset)
        found = dict.fromkeys(self._held(now))
        found.update(dict.fromkeys(pending_due(now, using=engine.using)))
        found.update(dict.fromkeys(ownerless_active(using=engine.using)))
        found.update(dict.fromkeys(expired_holders(cutoff, using=engine.using)))
        return list(found)

    def _held(self, now: datetime, *, limit: int = 500) -> list[str]:
        """The runs this engine holds that are due, in id order: those
        ``held_woken`` finds (a wake hint, a due timer or deadline) and
        those still pending whose start time has come (claimed, not driven yet:
        ``held_woken`` leaves them out, a worker queues a run when it claims it)."""
        engine = self.engine
        woken = held_woken(engine.engine_id, now, limit=limit, using=engine.using)
        mine = Exists(Claim.objects.filter(workflow_id=OuterRef("pk"), holder_id=engine.engine_id))
        pending = pending_due_filter(now)
        return list(
            WorkflowRun.objects.using(db_for(engine.using))
            .filter(Q(pk__in=woken) | (pending & mine))
            .order_by("pk")
            .values_list("pk", flat=True)[:limit]
        )

    def run_until_idle(self, *, max_turns: int = 10_000) -> Counter[str]:
        """Drive runnable runs until a full scan makes no progress; returns outcome counts."""
        outcomes: Counter[str] = Counter()
        turns = 0
        while turns < max_turns:
            progressed = False
            for run_id in self._candidates():
                if turns >= max_turns:
                    break
                claimed = self.engine.acquire(run_id)
                if not isinstance(claimed, Acquired):
                    outcomes[claimed.outcome] += 1
                    continue
                outcome = self.engine.drive(run_id)
                outcomes[outcome.value] += 1
                turns += 1
                progressed = progressed or outcome in PROGRESS
            if not progressed:
                break
        return outcomes

    def stop(self) -> None:
        """Shut the driver's engine down: its claims are released (epochs kept) and
        it is marked stopped. Leaving a ``with WorkflowDriver():`` block calls it."""
        self.engine.shutdown()

    def __enter__(self) -> WorkflowDriver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
