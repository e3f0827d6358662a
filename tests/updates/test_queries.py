"""``weft.query``: a read-only replay in the calling process, owner or not."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from weft_django import QueryError, WorkflowNotFoundError
from weft_django.models import (
    Claim,
    Engine,
    RunStatus,
    UpdateRequest,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from weft_django.ownership.claims.results import Acquired
from weft_django.runtime import registry
from weft_django.runtime.engine import TurnOutcome, WorkflowEngine
from weft_django.testing import WorkflowDriver

from .conftest import send
from .workflows import CALLS, STATE

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def _row_counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (WorkflowRun, WorkflowEvent, WorkflowSignal, UpdateRequest, Claim, Engine)
    }


def _cart_with_items(driver: WorkflowDriver, run_id: str, *amounts: int) -> None:
    weft.start("tests.updates.counter", workflow_id=run_id)
    driver.run_until_idle()
    for amount in amounts:
        send(run_id, "add", amount)
    driver.run_until_idle()


def test_query_answers_from_the_replayed_state(driver: WorkflowDriver) -> None:
    _cart_with_items(driver, "q1", 2, 5)
    assert weft.query("q1", "total") == 7
    assert weft.query("q1", "items", "x", 1) == {"items": [2, 5], "args": ["x", 1]}
    assert weft.get_handle("q1").query("total") == 7


def test_query_never_writes_and_runs_no_step(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.stepper", workflow_id="q2")
    driver.run_until_idle()
    assert weft.query("q2", "seen") == ["one"]
    marks = CALLS.copy()
    before = _row_counts()
    run_before = WorkflowRun.objects.values().get(pk="q2")
    with CaptureQueriesContext(connection) as captured:
        for _ in range(3):
            assert weft.query("q2", "seen") == ["one"]
    writes = [
        q["sql"] for q in captured.captured_queries if q["sql"].lstrip().upper().startswith(WRITES)
    ]
    assert writes == []
    assert _row_counts() == before
    assert WorkflowRun.objects.values().get(pk="q2") == run_before
    assert marks == CALLS
    assert len(captured.captured_queries) <= 3 * 4  # run row, history, clock at most


def test_query_from_another_engine_while_the_owner_is_mid_turn(
    make_engine: Callable[..., Any],
) -> None:
    owner = make_engine()
    weft.start("tests.updates.counter_steps", workflow_id="q3")
    assert isinstance(owner.acquire("q3"), Acquired)
    owner.drive("q3")
    send("q3", "add", 4)
    owner.drive("q3")
    seen: list[Any] = []

    def query_mid_turn() -> None:
        # Runs inside the owner's step "between": the turn is in flight.
        assert Claim.objects.get(workflow_id="q3").holder_id == owner.engine_id
        assert owner.in_flight == 1
        seen.append(weft.query("q3", "items"))
        seen.append(WorkflowRun.objects.get(pk="q3").status)

    STATE["block"] = query_mid_turn
    weft.signal("q3", "first", 1)
    assert owner.drive("q3") == TurnOutcome.PARKED
    assert seen == [{"items": [4], "args": []}, RunStatus.RUNNING]


@pytest.mark.django_db(transaction=True)
def test_query_from_another_thread_while_the_owner_is_mid_turn(
    weft_settings: Callable[..., None],
) -> None:
    """The owner's turn blocks inside a step on its own thread; the query (no engine at
    all) is answered from committed history meanwhile."""
    engine = WorkflowEngine(kind="test").start()
    try:
        weft.start("tests.updates.counter_steps", workflow_id="q4")
        engine.acquire("q4")
        engine.drive("q4")
        send("q4", "add", 3)
        engine.drive("q4")
        inside, release = threading.Event(), threading.Event()

        def block() -> None:
            inside.set()
            assert release.wait(20)

        STATE["block"] = block
        weft.signal("q4", "first", 1)
        outcome: list[TurnOutcome] = []

        def drive() -> None:
            try:
                outcome.append(engine.drive("q4"))
            finally:
                connection.close()

        thread = threading.Thread(target=drive)
        thread.start()
        try:
            assert inside.wait(20)
            assert WorkflowRun.objects.get(pk="q4").status == RunStatus.RUNNING
            assert weft.query("q4", "items") == {"items": [3], "args": []}
            assert weft.query("q4", "total") == 3
        finally:
            release.set()
            thread.join(20)
        assert outcome == [TurnOutcome.PARKED]
    finally:
        engine.shutdown()


def test_query_on_a_finished_run(driver: WorkflowDriver) -> None:
    _cart_with_items(driver, "q5", 1, 2, 3)
    weft.signal("q5", "done")
    driver.run_until_idle()
    assert WorkflowRun.objects.get(pk="q5").status == RunStatus.COMPLETED
    assert weft.query("q5", "total") == 6


def test_query_on_a_suspended_and_a_cancelled_run(driver: WorkflowDriver) -> None:
    _cart_with_items(driver, "q6", 9)
    weft.suspend("q6")
    assert weft.query("q6", "total") == 9
    weft.resume("q6")
    driver.run_until_idle()
    weft.cancel("q6")
    assert WorkflowRun.objects.get(pk="q6").status == RunStatus.CANCELLED
    assert weft.query("q6", "items") == {"items": [9], "args": []}


def test_unknown_query_name_is_an_error_naming_the_known_ones(driver: WorkflowDriver) -> None:
    _cart_with_items(driver, "q7")
    with pytest.raises(QueryError) as caught:
        weft.query("q7", "nope")
    assert "'nope'" in str(caught.value) and "boom, items, total" in str(caught.value)


def test_a_pending_run_cannot_be_queried(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="q8")
    with pytest.raises(QueryError, match="pending"):
        weft.query("q8", "total")


def test_a_raising_query_handler_is_a_query_error(driver: WorkflowDriver) -> None:
    _cart_with_items(driver, "q9", 1)
    with pytest.raises(QueryError, match="KeyError"):
        weft.query("q9", "boom")


def test_a_run_without_query_handlers_says_so(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.approval", workflow_id="q10")
    driver.run_until_idle()
    with pytest.raises(QueryError, match=r"registered: none"):
        weft.query("q10", "anything")


def test_a_workflow_type_unknown_here_is_a_query_error(driver: WorkflowDriver) -> None:
    _cart_with_items(driver, "q11", 1)
    definition = registry.get("tests.updates.counter")
    registry.unregister("tests.updates.counter")
    try:
        with pytest.raises(QueryError, match=r"tests\.updates\.counter"):
            weft.query("q11", "total")
    finally:
        registry.register(definition)


def test_a_missing_run_is_not_found(db: None) -> None:
    with pytest.raises(WorkflowNotFoundError):
        weft.query("no-such-run", "total")
