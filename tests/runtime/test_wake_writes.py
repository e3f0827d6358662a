"""A woken turn's fenced writes: clearing the wake hint and consuming a signal are
one statement each on PostgreSQL, and fenced like every other write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from weft_django.models import RunStatus, WorkflowEvent, WorkflowRun, WorkflowSignal
from weft_django.ownership.wake_writes import fenced_clear_hint
from weft_django.runtime.engine import TurnOutcome

from .conftest import expire_lease

postgres_only = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="the one-statement forms are PostgreSQL's"
)


@weft.workflow(name="tests.wake.waiter")
def waiter(ctx: weft.Context) -> Any:
    before = ctx.step(_mark, "before")
    got = ctx.wait_for_signal("go")
    return [before, got]


def _mark(label: str) -> str:
    return label


def parked(engine: Any, run_id: str) -> None:
    weft.start("tests.wake.waiter", workflow_id=run_id)
    engine.acquire(run_id)
    assert engine.drive(run_id) is TurnOutcome.PARKED


@pytest.mark.django_db
@pytest.mark.parametrize("payload", [{"n": 1, "s": "x"}, "text", 7, None, [1, "two"]])
def test_a_woken_turn_takes_the_signal_and_records_its_payload(
    make_engine: Callable[..., Any], payload: Any
) -> None:
    engine = make_engine()
    parked(engine, "wk-1")
    weft.signal("wk-1", "go", payload, signal_id="s-1")
    assert engine.drive("wk-1") is TurnOutcome.COMPLETED
    assert weft.result("wk-1", timeout=0) == ["before", payload]
    signal = WorkflowSignal.objects.get(run_id="wk-1")
    assert signal.consumed_at is not None and signal.consumed_seq is not None
    event = WorkflowEvent.objects.get(run_id="wk-1", kind="signal")
    assert (event.seq, event.name, event.result, event.epoch) == (
        signal.consumed_seq,
        "go",
        payload,
        1,
    )


@pytest.mark.django_db
@postgres_only
def test_a_woken_turn_is_six_statements_on_postgresql(make_engine: Callable[..., Any]) -> None:
    """Read the run, clear the wake hint, read the history, probe for the signal,
    take it (fence, consume, event, running), then the terminal commit."""
    engine = make_engine()
    parked(engine, "wk-2")
    weft.signal("wk-2", "go", 1, signal_id="s-2")
    with CaptureQueriesContext(connection) as queries:
        assert engine.drive("wk-2") is TurnOutcome.COMPLETED
    assert len(queries.captured_queries) == 6, [q["sql"][:100] for q in queries]
    assert WorkflowRun.objects.get(pk="wk-2").wake_hint_at is None


@pytest.mark.django_db
def test_a_deposed_engine_neither_takes_the_signal_nor_clears_the_hint(
    make_engine: Callable[..., Any],
) -> None:
    a, b = make_engine(), make_engine()
    parked(a, "wk-3")
    expire_lease(a)
    assert b.acquire("wk-3").epoch == 2
    weft.signal("wk-3", "go", "for b", signal_id="s-3")
    assert a.drive("wk-3") is TurnOutcome.DEPOSED
    run = WorkflowRun.objects.get(pk="wk-3")
    assert run.status == RunStatus.WAITING and run.wake_hint_at is not None
    assert WorkflowSignal.objects.get(run_id="wk-3").consumed_at is None
    assert not WorkflowEvent.objects.filter(run_id="wk-3", kind="signal").exists()
    assert b.drive("wk-3") is TurnOutcome.COMPLETED
    assert weft.result("wk-3", timeout=0) == ["before", "for b"]
    assert WorkflowEvent.objects.get(run_id="wk-3", kind="signal").epoch == 2


@pytest.mark.django_db
def test_signals_of_one_name_are_taken_oldest_first_once_each(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    parked(engine, "wk-4")
    weft.signal("wk-4", "go", "first", signal_id="s-4a")
    weft.signal("wk-4", "go", "second", signal_id="s-4b")
    assert engine.drive("wk-4") is TurnOutcome.COMPLETED
    assert weft.result("wk-4", timeout=0) == ["before", "first"]
    consumed = dict(
        WorkflowSignal.objects.filter(run_id="wk-4").values_list("signal_id", "consumed_at")
    )
    assert consumed["s-4a"] is not None and consumed["s-4b"] is None


@pytest.mark.django_db
@postgres_only
def test_clearing_the_hint_keeps_a_later_one_and_needs_the_claim(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    parked(engine, "wk-5")
    weft.signal("wk-5", "go", 1, signal_id="s-5")
    seen = WorkflowRun.objects.get(pk="wk-5").wake_hint_at
    later = seen.replace(microsecond=(seen.microsecond + 1) % 1_000_000)
    WorkflowRun.objects.filter(pk="wk-5").update(wake_hint_at=later)
    assert fenced_clear_hint(
        "default", workflow_id="wk-5", engine_id=engine.engine_id, epoch=1, seen=seen
    )
    assert WorkflowRun.objects.get(pk="wk-5").wake_hint_at == later
    assert (
        fenced_clear_hint(
            "default", workflow_id="wk-5", engine_id=engine.engine_id, epoch=2, seen=later
        )
        is False
    )
    assert WorkflowRun.objects.get(pk="wk-5").wake_hint_at == later
    assert fenced_clear_hint(
        "default", workflow_id="wk-5", engine_id=engine.engine_id, epoch=1, seen=later
    )
    assert WorkflowRun.objects.get(pk="wk-5").wake_hint_at is None
