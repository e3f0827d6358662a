"""Child workflows: started with the parent's history, awaited durably, on any engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import weft_django as weft
from weft_django.models import RunStatus, WorkflowRun
from weft_django.ownership.claims.results import Acquired
from weft_django.ownership.clock import db_now
from weft_django.ownership.passes import scans
from weft_django.runtime.engine import TurnOutcome
from weft_django.testing import WorkflowDriver

from .conftest import claim_of, history, kinds
from .workflows import CALLS


def test_child_result_returns_to_the_parent(driver: WorkflowDriver) -> None:
    weft.start("tests.parent", "tests.child_add", 5, workflow_id="p1")
    outcomes = driver.run_until_idle()
    assert outcomes["completed"] == 2
    assert weft.result("p1", timeout=0) == {"child": "p1/child-0", "result": 105}
    child = WorkflowRun.objects.get(pk="p1/child-0")
    assert child.parent_id == "p1"
    assert child.workflow_name == "tests.child_add"
    assert child.args == [5]
    assert CALLS["add"] == 1
    assert kinds("p1")[0] == ("child_start", "tests.child_add")
    assert kinds("p1")[-1] == ("child_result", "p1/child-0")


def test_child_with_explicit_id(driver: WorkflowDriver) -> None:
    weft.start("tests.parent", "tests.child_add", 1, child_id="kid", workflow_id="p2")
    driver.run_until_idle()
    assert weft.result("p2", timeout=0) == {"child": "kid", "result": 101}
    assert weft.get_handle("kid").describe().parent_id == "p2"


def test_child_failure_raises_workflow_failed_in_the_parent(driver: WorkflowDriver) -> None:
    weft.start("tests.parent", "tests.child_fail", workflow_id="p3")
    driver.run_until_idle()
    assert WorkflowRun.objects.get(pk="p3/child-0").status == RunStatus.FAILED
    assert weft.result("p3", timeout=0) == {
        "child": "p3/child-0",
        "failed": "ValueError",
        "msg": "the child broke",
    }


def test_cancelled_child_raises_workflow_cancelled_in_the_parent(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.parent", "tests.child_waits", workflow_id="p4")
    assert driver.run_until_idle() == {"parked": 2}
    weft.cancel("p4/child-0")
    assert WorkflowRun.objects.get(pk="p4").wake_hint_at is not None
    driver.run_until_idle()
    assert weft.result("p4", timeout=0) == {"child": "p4/child-0", "cancelled": True}


def test_parent_and_child_on_different_engines(make_engine: Callable[..., Any]) -> None:
    engine_a = make_engine()
    engine_b = make_engine()
    weft.start("tests.parent", "tests.child_waits", workflow_id="p5")

    # A owns the parent: it starts the child and parks on its result.
    assert isinstance(engine_a.acquire("p5"), Acquired)
    assert engine_a.drive("p5") == TurnOutcome.PARKED
    parent = WorkflowRun.objects.get(pk="p5")
    assert parent.waiting_on["kind"] == "child"
    assert parent.waiting_on["child_id"] == "p5/child-0"

    # B finds the new child, claims it and runs it to its end.
    assert scans.pending_due(db_now()) == ["p5/child-0"]
    assert isinstance(engine_b.acquire("p5/child-0"), Acquired)
    assert engine_b.drive("p5/child-0") == TurnOutcome.PARKED
    weft.signal("p5/child-0", "release", "done")
    assert scans.held_woken(engine_b.engine_id, db_now()) == ["p5/child-0"]
    assert scans.held_woken(engine_a.engine_id, db_now()) == []
    assert engine_b.drive("p5/child-0") == TurnOutcome.COMPLETED
    assert claim_of("p5/child-0") == (1, None)

    # The child's terminal commit left a wake hint on the parent, which A sees.
    assert WorkflowRun.objects.get(pk="p5").wake_hint_at is not None
    assert scans.held_woken(engine_a.engine_id, db_now()) == ["p5"]
    assert engine_a.drive("p5") == TurnOutcome.COMPLETED
    assert weft.result("p5", timeout=0) == {"child": "p5/child-0", "result": "done"}
    assert {engine for *_rest, engine, _e in history("p5")} == {engine_a.engine_id}
    assert {engine for *_rest, engine, _e in history("p5/child-0")} == {engine_b.engine_id}


def test_child_already_finished_when_the_parent_asks(make_engine: Callable[..., Any]) -> None:
    engine = make_engine()
    weft.start("tests.parent", "tests.child_add", 2, workflow_id="p6")
    engine.acquire("p6")
    assert engine.drive("p6") == TurnOutcome.PARKED
    engine.acquire("p6/child-0")
    assert engine.drive("p6/child-0") == TurnOutcome.COMPLETED
    assert engine.drive("p6") == TurnOutcome.COMPLETED
    assert weft.result("p6", timeout=0) == {"child": "p6/child-0", "result": 102}
    # Replay did not start a second child.
    assert WorkflowRun.objects.filter(parent_id="p6").count() == 1


def test_the_handle_gives_the_child_id_and_it_counts_every_history_event(
    driver: WorkflowDriver,
) -> None:
    """``<parent>/child-<seq>``: ``seq`` is the child_start event's position in the
    parent's history, which holds a wait's marker only when that wait parked. The
    same code gives different ids, so ``handle.id`` is how to know it."""
    weft.start("tests.child_after_wait", workflow_id="ids-parked")
    driver.run_until_idle()  # parks on the signal wait: marker at 0
    weft.signal("ids-parked", "go")
    driver.run_until_idle()
    assert weft.result("ids-parked", timeout=0) == {"child": "ids-parked/child-2", "result": 101}
    assert kinds("ids-parked")[:3] == [
        ("wait", "signal:go"),
        ("signal", "go"),
        ("child_start", "tests.child_add"),
    ]

    weft.start("tests.child_after_wait", workflow_id="ids-ready")
    weft.signal("ids-ready", "go")  # there before the first turn: the wait never parks
    driver.run_until_idle()
    assert weft.result("ids-ready", timeout=0) == {"child": "ids-ready/child-1", "result": 101}
    for parent in ("ids-parked", "ids-ready"):
        child_id = weft.result(parent, timeout=0)["child"]
        assert WorkflowRun.objects.get(pk=child_id).parent_id == parent
