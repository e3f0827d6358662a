"""Steps: checkpointing, retries, transactional steps under deposition, recorded values."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import weft_django as weft
from weft_django import RetryPolicy
from weft_django.models import Claim, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership.claims.results import Acquired
from weft_django.ownership.clock import db_now
from weft_django.ownership.passes import scans
from weft_django.runtime.engine import TurnOutcome
from weft_django.testing import WorkflowDriver

from . import workflows
from .conftest import claim_of, expire_lease, history, kinds, steplog
from .workflows import CALLS, LOG, STATE


def test_step_result_is_checkpointed_once(driver: WorkflowDriver) -> None:
    weft.start("tests.steps", 3, workflow_id="st1")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("st1", timeout=0) == ["s0", "s1", "s2"]
    rows = list(
        WorkflowEvent.objects.filter(run_id="st1").order_by("seq").values_list("kind", "result")
    )
    assert rows == [("step", "s0"), ("step", "s1"), ("step", "s2")]
    assert steplog("st1") == ["s0", "s1", "s2"]


def test_default_step_name_is_the_functions_dotted_path(driver: WorkflowDriver) -> None:
    weft.start("tests.child_add", 1, workflow_id="st2")
    driver.run_until_idle()
    assert kinds("st2") == [("step", "tests.runtime.workflows.add")]
    assert weft.result("st2", timeout=0) == 101


# -- retries -------------------------------------------------------------------


def test_retry_until_success_records_one_event(driver: WorkflowDriver) -> None:
    STATE["fail_times"] = 2
    weft.start("tests.retrying", 3, workflow_id="rt1")
    assert driver.run_until_idle() == {"parked": 1}
    assert CALLS["flaky"] == 3
    assert LOG == [{"value": "ok"}]
    steps = WorkflowEvent.objects.filter(run_id="rt1", kind="step")
    assert list(steps.values_list("name", "result", "error")) == [("flaky", "ok", None)]

    weft.signal("rt1", "go")
    driver.run_until_idle()
    assert weft.result("rt1", timeout=0) == {"value": "ok"}
    assert CALLS["flaky"] == 3


def test_exhausted_retries_raise_step_failed_live_and_on_replay(driver: WorkflowDriver) -> None:
    STATE["fail_times"] = 10
    weft.start("tests.retrying", 3, workflow_id="rt2")
    driver.run_until_idle()
    assert CALLS["flaky"] == 3
    failure = {"step": "flaky", "type": "ConnectionError", "message": "flaky attempt 3"}
    assert [failure] == LOG
    event = WorkflowEvent.objects.get(run_id="rt2", kind="step")
    assert event.result is None
    assert event.error["type"] == "ConnectionError"
    assert event.error["message"] == "flaky attempt 3"
    assert event.error["attempts"] == 3

    # The replay raises the same StepFailedError from history, without calling flaky.
    weft.signal("rt2", "go")
    assert driver.run_until_idle() == {"completed": 1}
    assert CALLS["flaky"] == 3
    assert [failure, failure] == LOG
    assert weft.result("rt2", timeout=0) == failure


def test_single_attempt_by_default(driver: WorkflowDriver) -> None:
    STATE["fail_times"] = 1
    weft.start("tests.retrying", 1, workflow_id="rt3")
    driver.run_until_idle()
    assert CALLS["flaky"] == 1
    assert LOG == [{"step": "flaky", "type": "ConnectionError", "message": "flaky attempt 1"}]


# -- transactional steps ---------------------------------------------------------


def test_transactional_step_failure_rolls_its_writes_back_before_the_retry(
    driver: WorkflowDriver,
) -> None:
    def fail_after_write() -> None:
        raise RuntimeError("after the write")

    workflows.hook("after", "tx", fail_after_write)
    weft.start("tests.transactional_retry", workflow_id="tx1")
    assert driver.run_until_idle() == {"completed": 1}
    assert CALLS["tx"] == 2
    assert steplog("tx1") == ["tx"]  # the first attempt's row was rolled back
    assert list(WorkflowEvent.objects.filter(run_id="tx1").values_list("kind", "result")) == [
        ("step", "tx")
    ]


def test_transactional_step_deposed_before_checkpoint_is_rolled_back(
    make_engine: Callable[..., Any],
) -> None:
    engine_a = make_engine()
    engine_b = make_engine()
    weft.start("tests.transactional", workflow_id="tx2")
    assert isinstance(engine_a.acquire("tx2"), Acquired)

    seen: dict[str, Any] = {}

    def deposed_after_the_write() -> None:
        # Between the step's ORM write and its checkpoint, the claim moves on.
        seen["rows_inside"] = steplog("tx2")
        Claim.objects.filter(workflow_id="tx2").update(holder_id=engine_b.engine_id, epoch=2)

    workflows.hook("after", "tx", deposed_after_the_write)
    assert engine_a.drive("tx2") == TurnOutcome.DEPOSED

    assert seen["rows_inside"] == ["s0", "tx"]  # the write happened...
    assert steplog("tx2") == ["s0"]  # ...and was rolled back with the checkpoint
    assert kinds("tx2") == [("step", "s0")]
    assert CALLS["tx"] == 1
    assert engine_a.ownership.claims.epoch_of("tx2") is None  # A dropped the run

    # The new owner (after A's lease ran out) writes it exactly once.
    expire_lease(engine_a)
    claimed = engine_b.acquire("tx2")
    assert isinstance(claimed, Acquired) and claimed.epoch == 2
    assert engine_b.drive("tx2") == TurnOutcome.COMPLETED
    assert steplog("tx2") == ["s0", "tx", "s2"]
    assert CALLS["tx"] == 2
    assert [(name, engine, epoch) for _s, _k, name, engine, epoch in history("tx2")] == [
        ("s0", engine_a.engine_id, 1),
        ("tx", engine_b.engine_id, 2),
        ("s2", engine_b.engine_id, 2),
    ]
    assert weft.result("tx2", timeout=0) == ["s0", "tx", "s2"]


def test_transactional_step_is_not_rerun_on_replay(driver: WorkflowDriver) -> None:
    weft.start("tests.transactional", workflow_id="tx3")
    driver.run_until_idle()
    assert steplog("tx3") == ["s0", "tx", "s2"]
    assert dict(CALLS) == {"s0": 1, "tx": 1, "s2": 1}


# -- deposition ------------------------------------------------------------------


def test_deposed_engine_drops_only_that_run(make_engine: Callable[..., Any]) -> None:
    engine_a = make_engine()
    engine_b = make_engine()
    weft.start("tests.steps", 5, workflow_id="dp1")
    weft.start("tests.steps_around_signal", workflow_id="dp2")
    assert isinstance(engine_a.acquire("dp1"), Acquired)
    assert isinstance(engine_a.acquire("dp2"), Acquired)
    assert engine_a.drive("dp2") == TurnOutcome.PARKED

    takeover: dict[str, Any] = {}

    def taken_over() -> None:
        # A's lease runs out while s2 is running; B takes dp1 over.
        expire_lease(engine_a)
        takeover["claim"] = engine_b.acquire("dp1")

    workflows.hook("after", "s2", taken_over)
    assert engine_a.drive("dp1") == TurnOutcome.DEPOSED
    assert isinstance(takeover["claim"], Acquired) and takeover["claim"].epoch == 2

    # A's s2 checkpoint was refused: nothing by A after the takeover.
    assert [(name, engine) for _s, _k, name, engine, _e in history("dp1")] == [
        ("s0", engine_a.engine_id),
        ("s1", engine_a.engine_id),
    ]
    assert engine_a.ownership.claims.held == {"dp2": 1}

    # B finishes dp1; s2 ran twice (a plain step is at-least-once), the rest once.
    assert engine_b.drive("dp1") == TurnOutcome.COMPLETED
    assert steplog("dp1") == ["s0", "s1", "s2", "s2", "s3", "s4"]
    assert weft.result("dp1", timeout=0) == ["s0", "s1", "s2", "s3", "s4"]
    assert [engine for _s, _k, _n, engine, _e in history("dp1")][2:] == [engine_b.engine_id] * 3

    # A's other run is unaffected: it renews and goes on.
    engine_a.ownership.claims.renew()
    assert engine_a.ownership.claims.held == {"dp2": 1}
    weft.signal("dp2", "go")
    assert engine_a.drive("dp2") == TurnOutcome.COMPLETED
    assert WorkflowRun.objects.get(pk="dp2").status == RunStatus.COMPLETED
    assert claim_of("dp2") == (1, None)


def test_parked_run_taken_over_refuses_the_old_owners_park(
    make_engine: Callable[..., Any],
) -> None:
    engine_a = make_engine()
    engine_b = make_engine()
    weft.start("tests.steps_around_signal", workflow_id="dp3")
    engine_a.acquire("dp3")
    assert engine_a.drive("dp3") == TurnOutcome.PARKED
    before = history("dp3")

    expire_lease(engine_a)
    assert isinstance(engine_b.acquire("dp3"), Acquired)
    assert engine_a.drive("dp3") == TurnOutcome.DEPOSED
    assert history("dp3") == before
    assert engine_a.ownership.claims.epoch_of("dp3") is None
    assert claim_of("dp3") == (2, engine_b.engine_id)


# -- recorded values -------------------------------------------------------------


def test_now_uuid_random_are_identical_on_replay(driver: WorkflowDriver) -> None:
    weft.start("tests.recorded_values", workflow_id="rv1")
    driver.run_until_idle()
    assert len(LOG) == 1
    first = LOG[0]
    weft.signal("rv1", "go")
    driver.run_until_idle()
    assert len(LOG) == 2
    assert LOG[1] == first
    assert weft.result("rv1", timeout=0) == first
    assert kinds("rv1")[:3] == [("now", ""), ("uuid4", ""), ("random", "")]
    assert 0.0 <= first["random"] < 1.0


def test_a_deposed_engine_does_not_swallow_the_new_owners_wake_hint(
    make_engine: Callable[..., Any],
) -> None:
    engine_a = make_engine()
    engine_b = make_engine()
    weft.start("tests.steps_around_signal", workflow_id="dp4")
    engine_a.acquire("dp4")
    assert engine_a.drive("dp4") == TurnOutcome.PARKED
    expire_lease(engine_a)
    assert isinstance(engine_b.acquire("dp4"), Acquired)

    weft.signal("dp4", "go", 1)
    hint = WorkflowRun.objects.get(pk="dp4").wake_hint_at
    assert hint is not None
    # A has not noticed yet and drives the run for the hint: its writes are refused...
    assert engine_a.drive("dp4") == TurnOutcome.DEPOSED
    # ...including clearing the hint, which is the new owner's wake-up.
    assert WorkflowRun.objects.get(pk="dp4").wake_hint_at == hint
    assert scans.held_woken(engine_b.engine_id, db_now()) == ["dp4"]
    assert engine_b.drive("dp4") == TurnOutcome.COMPLETED
    assert weft.result("dp4", timeout=0)["go"] == 1


def test_non_retryable_errors_fail_at_once(driver: WorkflowDriver) -> None:
    STATE["fail_times"] = 5
    weft.start("tests.retry_policy", 5, 0, True, workflow_id="rt4")
    assert driver.run_until_idle() == {"failed": 1}
    assert CALLS["flaky"] == 1
    error = WorkflowRun.objects.get(pk="rt4").error
    assert error["type"] == "StepFailedError"
    assert "ConnectionError: flaky attempt 1" in error["message"]
    event = WorkflowEvent.objects.get(run_id="rt4")
    assert (event.kind, event.error["attempts"]) == ("step", 1)


def test_retry_interval_backs_off_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=9, initial_interval=1, backoff=2.0, max_interval=30)
    assert [policy.interval(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    timed = RetryPolicy(initial_interval=timedelta(milliseconds=500), max_interval=60)
    assert timed.interval(2) == 1.0
    assert RetryPolicy().max_attempts == 3


def test_a_stopping_engine_abandons_a_retry_wait(make_engine: Callable[..., Any]) -> None:
    engine = make_engine()
    STATE["fail_times"] = 1
    weft.start("tests.retry_policy", 3, 30, False, workflow_id="rt5")
    engine.acquire("rt5")
    engine.stopping.set()  # shutdown began: the 30 s retry wait must not hold it up
    began = time.monotonic()
    assert engine.drive("rt5") == TurnOutcome.ABANDONED
    assert time.monotonic() - began < 5
    assert CALLS["flaky"] == 1
    assert kinds("rt5") == []
    assert claim_of("rt5") == (1, engine.engine_id)  # kept: shutdown releases it
