"""weft_django.testing.WorkflowDriver, used the way its docstring shows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import weft_django as weft
from weft_django.models import Claim, Engine, EngineKind, EngineStatus, RunStatus, WorkflowRun
from weft_django.ownership.claims.results import Acquired
from weft_django.ownership.clock import db_now
from weft_django.runtime.engine import WorkflowEngine
from weft_django.testing import WorkflowDriver

from .workflows import CALLS


def test_docstring_example(db: None, weft_settings: Callable[..., None]) -> None:
    driver = WorkflowDriver()
    handle = weft.start("tests.approve_order", 42, workflow_id="order-42")
    driver.run_until_idle()  # runs until it waits for "decision"
    assert weft.describe("order-42").waiting_on["kind"] == "signal"
    weft.signal("order-42", "decision", {"status": "approved"})
    driver.run_until_idle()
    assert weft.describe("order-42").waiting_on["kind"] == "sleep"
    driver.advance(timedelta(minutes=5))  # fire the durable timer
    assert handle.result(timeout=0) == {"status": "approved"}
    assert CALLS["reserve_stock"] == 1
    driver.stop()


def test_docstring_example_expiry_path(driver: WorkflowDriver) -> None:
    handle = weft.start("tests.approve_order", 43, workflow_id="order-43")
    driver.run_until_idle()
    driver.advance(timedelta(days=3, seconds=1))
    assert handle.result(timeout=0) == {"status": "expired"}


def test_driver_is_a_real_engine_of_kind_test(driver: WorkflowDriver) -> None:
    row = Engine.objects.get(id=driver.engine.engine_id)
    assert row.kind == EngineKind.TEST
    assert row.status == EngineStatus.RUNNING
    weft.start("tests.collect_signals", "x", 1, workflow_id="d1")
    driver.run_until_idle()
    assert Claim.objects.get(workflow_id="d1").holder_id == driver.engine.engine_id


def test_run_until_idle_counts_outcomes_and_stops(driver: WorkflowDriver) -> None:
    assert driver.run_until_idle() == {}
    weft.start("tests.echo", workflow_id="d2")
    weft.start("tests.fails", workflow_id="d3")
    weft.start("tests.collect_signals", "x", 1, workflow_id="d4")
    assert driver.run_until_idle() == {"completed": 1, "failed": 1, "parked": 1}
    assert driver.run_until_idle() == {}


def test_run_until_idle_follows_children_to_the_end(driver: WorkflowDriver) -> None:
    weft.start("tests.parent", "tests.child_add", 1, workflow_id="d5")
    outcomes = driver.run_until_idle()
    assert outcomes == {"parked": 1, "completed": 2}
    assert weft.result("d5", timeout=0)["result"] == 101


def test_advance_moves_only_the_drivers_timer_clock(driver: WorkflowDriver) -> None:
    weft.start("tests.sleeper", 60, workflow_id="d6")
    driver.run_until_idle()
    driver.advance(59.5)
    assert WorkflowRun.objects.get(pk="d6").status == RunStatus.WAITING
    driver.advance(1)
    assert WorkflowRun.objects.get(pk="d6").status == RunStatus.COMPLETED
    assert driver.engine.time_offset == timedelta(seconds=60.5)


def test_stop_releases_claims_and_marks_the_engine_stopped(
    db: None, weft_settings: Callable[..., None]
) -> None:
    with WorkflowDriver() as driver:
        weft.start("tests.collect_signals", "x", 1, workflow_id="d7")
        driver.run_until_idle()
        engine_id = driver.engine.engine_id
        assert Claim.objects.get(workflow_id="d7").holder_id == engine_id
    assert Claim.objects.get(workflow_id="d7").holder_id is None
    assert Engine.objects.get(id=engine_id).status == EngineStatus.STOPPED

    # Another driver picks the ownerless run up.
    with WorkflowDriver() as other:
        weft.signal("d7", "x", "after restart")
        assert other.run_until_idle() == {"completed": 1}
    assert weft.result("d7", timeout=0) == ["after restart"]


def test_driver_accepts_an_engine(db: None, weft_settings: Callable[..., None]) -> None:
    engine = WorkflowEngine(kind=EngineKind.TEST, engine_id="given-engine")
    with WorkflowDriver(engine=engine) as driver:
        assert driver.engine is engine and engine.started
        weft.start("tests.echo", workflow_id="d8")
        driver.run_until_idle()
    assert Engine.objects.get(id="given-engine").status == EngineStatus.STOPPED


def test_max_turns_bounds_the_loop(driver: WorkflowDriver) -> None:
    for index in range(3):
        weft.start("tests.echo", index, workflow_id=f"d9-{index}")
    assert driver.run_until_idle(max_turns=1) == {"completed": 1}
    assert driver.run_until_idle(max_turns=5) == {"completed": 2}
    assert driver.run_until_idle() == {}


def test_pending_runs_the_driver_already_holds_are_driven_once_due(
    driver: WorkflowDriver,
) -> None:
    """Claimed but never driven (a test acquired them): the driver's own scan of
    held pending runs finds them, a scheduled one once its start time comes."""
    weft.start("tests.echo", workflow_id="d10")
    weft.start("tests.echo", workflow_id="d11", start_at=db_now() + timedelta(minutes=5))
    for run_id in ("d10", "d11"):
        assert isinstance(driver.engine.acquire(run_id), Acquired)
    assert driver.run_until_idle() == {"completed": 1}
    assert WorkflowRun.objects.get(pk="d11").status == RunStatus.PENDING
    driver.advance(timedelta(minutes=5, seconds=1))
    assert WorkflowRun.objects.get(pk="d11").status == RunStatus.COMPLETED
