"""Parking: the common first turn of a waiting run is a few plain reads and one
fenced write; the write is fenced, and a signal racing it is never lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from weft_django.models import Claim, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.runtime.engine import TurnOutcome
from weft_django.runtime.turn import Turn

from .conftest import expire_lease


@weft.workflow(name="tests.park.waiter")
def waiter(ctx: weft.Context) -> Any:
    return ctx.wait_for_signal("go")


@weft.workflow(name="tests.park.timed_waiter")
def timed_waiter(ctx: weft.Context) -> Any:
    return ctx.wait_for_signal("go", timeout=3600)


@pytest.mark.django_db
def test_a_first_turn_that_parks_is_four_statements_on_postgresql(
    make_engine: Callable[..., Any],
) -> None:
    """Read the run (a pending run has no history to read), probe for a buffered
    signal, read pending updates, park (fence, wait event and status in one
    statement)."""
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement park is PostgreSQL's (elsewhere a fenced transaction)")
    engine = make_engine()
    weft.start("tests.park.waiter", workflow_id="pk-1")
    engine.acquire("pk-1")
    with CaptureQueriesContext(connection) as queries:
        assert engine.drive("pk-1") is TurnOutcome.PARKED
    assert len(queries.captured_queries) == 4, [q["sql"][:120] for q in queries]
    run = WorkflowRun.objects.get(pk="pk-1")
    assert run.status == RunStatus.WAITING and run.started_at is not None
    assert run.waiting_on == {"kind": "signal", "name": "go", "deadline": None}
    assert list(WorkflowEvent.objects.filter(run_id="pk-1").values_list("kind", "epoch")) == [
        ("wait", 1)
    ]


@pytest.mark.django_db
def test_a_deposed_engine_cannot_park(make_engine: Callable[..., Any]) -> None:
    a, b = make_engine(), make_engine()
    weft.start("tests.park.waiter", workflow_id="pk-2")
    a.acquire("pk-2")
    expire_lease(a)
    assert b.acquire("pk-2").epoch == 2
    assert a.drive("pk-2") is TurnOutcome.DEPOSED
    run = WorkflowRun.objects.get(pk="pk-2")
    assert run.status == RunStatus.PENDING and run.started_at is None
    assert not WorkflowEvent.objects.filter(run_id="pk-2").exists()
    assert Claim.objects.get(pk="pk-2").holder_id == b.engine_id
    assert b.drive("pk-2") is TurnOutcome.PARKED


@pytest.mark.django_db
def test_a_signal_stored_between_the_probe_and_the_park_wakes_the_run(
    make_engine: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The buffered-signal probe is a plain read outside the fence: a signal
    stored after it must still reach the run (its wake hint survives the park)."""
    engine = make_engine()
    weft.start("tests.park.waiter", workflow_id="pk-3")
    engine.acquire("pk-3")
    original = Turn.pending_updates

    def signal_meanwhile(self: Turn) -> Any:
        weft.signal("pk-3", "go", "late", signal_id="late-1")
        return original(self)

    monkeypatch.setattr(Turn, "pending_updates", signal_meanwhile)
    assert engine.drive("pk-3") is TurnOutcome.PARKED
    monkeypatch.setattr(Turn, "pending_updates", original)
    run = WorkflowRun.objects.get(pk="pk-3")
    assert run.status == RunStatus.WAITING and run.wake_hint_at is not None
    assert engine.ownership.due_runs(engine.now(), ["tests.park.waiter"], limit=10) == ["pk-3"]
    assert engine.drive("pk-3") is TurnOutcome.COMPLETED
    assert weft.result("pk-3", timeout=0) == "late"
