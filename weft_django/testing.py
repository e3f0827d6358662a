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

:func:`replay` replays a history ``manage.py weft_replay --export`` wrote
against the code as it is now, so real histories can be kept as regression
fixtures (docs/deploying-code.md)::

    def test_old_orders_still_replay():
        replay("tests/histories/order-42.json", "shop.order")
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
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
from .runtime import registry
from .runtime.engine import PROGRESS, WorkflowEngine
from .runtime.registry import WorkflowDefinition
from .runtime.replay_check import parse_history, replay_history


def replay(
    history: dict[str, Any] | str | os.PathLike[str],
    workflow: str | Callable[..., Any] | WorkflowDefinition | None = None,
) -> None:
    """Replay an exported run history against the code as it is now, read-only.

    ``history`` is the dict ``manage.py weft_replay --export`` writes as JSON,
    or the path of such a file. ``workflow`` is the code to replay it with: a
    registered name (the history's version of it), a decorated function, a
    definition, or a plain ``fn(ctx, ...)``; default: the history's own name
    and version, as registered. Raises ``NonDeterminismError`` with the first
    divergence (what the history recorded, what the code asks for, at which
    event); ``PayloadError`` when ``history`` is not such a history.
    """
    if not isinstance(history, dict):
        with open(history, encoding="utf-8") as source:
            history = json.load(source)
    run, events = parse_history(history)
    divergence = replay_history(run, events, _definition(run, workflow))
    if divergence is not None:
        raise divergence


def _definition(
    run: dict[str, Any], workflow: str | Callable[..., Any] | WorkflowDefinition | None
) -> WorkflowDefinition:
    name, version = run["workflow_name"], int(run["workflow_version"])
    if workflow is None or isinstance(workflow, str):
        return registry.get(workflow or name, version)
    if isinstance(workflow, WorkflowDefinition) or hasattr(workflow, "_weft_definition"):
        return registry.resolve(workflow)
    return WorkflowDefinition(name=name, version=version, fn=workflow)


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
