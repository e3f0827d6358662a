"""A woken turn's fenced writes: consuming a signal is one statement on PostgreSQL,
fenced like every other write; the wake hint the turn answers is cleared by its
park, so a turn cut off before it leaves the hint for whoever drives the run next."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from weft_django.models import RunStatus, WorkflowEvent, WorkflowRun, WorkflowSignal
from weft_django.runtime.engine import TurnOutcome
from weft_django.runtime.port import Abandon
from weft_django.runtime.writes import RunWrites

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
def test_a_woken_turn_is_five_statements_on_postgresql(make_engine: Callable[..., Any]) -> None:
    """Read the run, read the history, probe for the signal, take it (fence,
    consume, event, running), then the terminal commit (which clears the hint)."""
    engine = make_engine()
    parked(engine, "wk-2")
    weft.signal("wk-2", "go", 1, signal_id="s-2")
    with CaptureQueriesContext(connection) as queries:
        assert engine.drive("wk-2") is TurnOutcome.COMPLETED
    assert len(queries.captured_queries) == 5, [q["sql"][:100] for q in queries]
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


@weft.workflow(name="tests.wake.twice")
def twice(ctx: weft.Context) -> Any:
    first = ctx.wait_for_signal("go")
    second = ctx.wait_for_signal("again")
    return [first, second]


def parked_twice(engine: Any, run_id: str) -> None:
    weft.start("tests.wake.twice", workflow_id=run_id)
    engine.acquire(run_id)
    assert engine.drive(run_id) is TurnOutcome.PARKED
    weft.signal(run_id, "go", 1, signal_id=f"{run_id}-go")


def hint_of(run_id: str) -> Any:
    return WorkflowRun.objects.get(pk=run_id).wake_hint_at


@pytest.mark.django_db
def test_a_woken_turn_that_parks_again_clears_the_hint_it_answered(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    parked_twice(engine, "wk-5")
    assert hint_of("wk-5") is not None
    assert engine.drive("wk-5") is TurnOutcome.PARKED
    run = WorkflowRun.objects.get(pk="wk-5")
    assert run.wake_hint_at is None and run.waiting_on["name"] == "again"


@pytest.mark.django_db
def test_a_woken_turn_cut_off_before_its_park_leaves_the_hint(
    make_engine: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn took its signal, then died before parking (a crash, a lost
    connection): the hint stays, so the run is due for whoever drives it next
    (a reclaim keeps a parked run without a turn only when nothing is due)."""
    engine = make_engine()
    parked_twice(engine, "wk-6")
    seen = hint_of("wk-6")
    real_park = RunWrites.park

    def cut_off(self: RunWrites, *args: Any, **kwargs: Any) -> None:
        raise Abandon("database", RuntimeError("connection lost before the park"))

    monkeypatch.setattr(RunWrites, "park", cut_off)
    assert engine.drive("wk-6") is TurnOutcome.ABANDONED
    assert hint_of("wk-6") == seen
    assert WorkflowSignal.objects.get(run_id="wk-6").consumed_at is not None
    monkeypatch.setattr(RunWrites, "park", real_park)
    engine.backoff.succeeded("wk-6")
    assert engine.drive("wk-6") is TurnOutcome.PARKED  # the signal replayed, not taken again
    run = WorkflowRun.objects.get(pk="wk-6")
    assert run.wake_hint_at is None and run.waiting_on["name"] == "again"


@pytest.mark.django_db
def test_a_hint_left_during_the_turn_survives_its_park(
    make_engine: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    parked_twice(engine, "wk-7")
    seen = hint_of("wk-7")
    later = seen.replace(microsecond=(seen.microsecond + 1) % 1_000_000)
    real_park = RunWrites.park

    def park(self: RunWrites, *args: Any, **kwargs: Any) -> None:
        WorkflowRun.objects.filter(pk="wk-7").update(wake_hint_at=later)  # a signal meanwhile
        real_park(self, *args, **kwargs)

    monkeypatch.setattr(RunWrites, "park", park)
    assert engine.drive("wk-7") is TurnOutcome.PARKED
    run = WorkflowRun.objects.get(pk="wk-7")
    assert run.wake_hint_at == later and run.waiting_on["name"] == "again"
