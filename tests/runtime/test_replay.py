"""Replay: recorded steps never run again; a crashed turn resumes on another engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import weft_django as weft
from weft_django.exceptions import NonDeterminismError
from weft_django.models import RunStatus, WorkflowRun
from weft_django.ownership.claims.results import Acquired
from weft_django.runtime.engine import TurnOutcome
from weft_django.runtime.port import Event
from weft_django.runtime.replay import Replay
from weft_django.testing import WorkflowDriver

from . import workflows
from .conftest import claim_of, expire_lease, history, kinds, steplog
from .workflows import CALLS, SimulatedCrash


def _crash() -> None:
    raise SimulatedCrash("the worker process died")


def test_resume_replays_recorded_steps_without_running_them(driver: WorkflowDriver) -> None:
    weft.start("tests.steps_around_signal", workflow_id="r1")
    assert driver.run_until_idle() == {"parked": 1}
    assert dict(CALLS) == {"s0": 1, "s1": 1}
    assert kinds("r1") == [("step", "s0"), ("step", "s1"), ("wait", "signal:go")]

    weft.signal("r1", "go", "now")
    assert driver.run_until_idle() == {"completed": 1}

    assert weft.result("r1", timeout=0) == {"steps": ["s0", "s1", "s2", "s3"], "go": "now"}
    assert dict(CALLS) == {"s0": 1, "s1": 1, "s2": 1, "s3": 1}
    assert steplog("r1") == ["s0", "s1", "s2", "s3"]
    assert kinds("r1") == [
        ("step", "s0"),
        ("step", "s1"),
        ("wait", "signal:go"),
        ("signal", "go"),
        ("step", "s2"),
        ("step", "s3"),
    ]
    assert [seq for seq, *_ in history("r1")] == [0, 1, 2, 3, 4, 5]


def test_crashed_turn_resumes_on_another_engine_after_lease_expiry(
    make_engine: Callable[..., Any],
) -> None:
    engine_a = make_engine()
    weft.start("tests.steps", 5, workflow_id="r2")
    assert isinstance(engine_a.acquire("r2"), Acquired)
    workflows.hook("before", "s3", _crash)

    with pytest.raises(SimulatedCrash):
        engine_a.drive("r2")

    # s0..s2 completed and were checkpointed by A; s3 died before doing anything.
    assert dict(CALLS) == {"s0": 1, "s1": 1, "s2": 1}
    assert steplog("r2") == ["s0", "s1", "s2"]
    assert [(seq, name, engine, epoch) for seq, _k, name, engine, epoch in history("r2")] == [
        (0, "s0", engine_a.engine_id, 1),
        (1, "s1", engine_a.engine_id, 1),
        (2, "s2", engine_a.engine_id, 1),
    ]
    assert WorkflowRun.objects.get(pk="r2").status == RunStatus.RUNNING

    # While A's lease is live, nobody else may take the run.
    engine_b = make_engine()
    assert engine_b.claim_and_drive("r2").outcome == "not_expired"

    expire_lease(engine_a)
    claimed = engine_b.acquire("r2")
    assert isinstance(claimed, Acquired) and claimed.takeover and claimed.epoch == 2
    assert engine_b.drive("r2") == TurnOutcome.COMPLETED

    assert weft.result("r2", timeout=0) == ["s0", "s1", "s2", "s3", "s4"]
    assert dict(CALLS) == {"s0": 1, "s1": 1, "s2": 1, "s3": 1, "s4": 1}
    assert steplog("r2") == ["s0", "s1", "s2", "s3", "s4"]
    assert [(name, engine, epoch) for _s, _k, name, engine, epoch in history("r2")][3:] == [
        ("s3", engine_b.engine_id, 2),
        ("s4", engine_b.engine_id, 2),
    ]
    assert claim_of("r2") == (2, None)  # released at the terminal commit


def test_driver_reclaims_a_crashed_engines_run(
    make_engine: Callable[..., Any], driver: WorkflowDriver
) -> None:
    engine_a = make_engine()
    weft.start("tests.steps", 4, workflow_id="r3")
    engine_a.acquire("r3")
    workflows.hook("before", "s1", _crash)
    with pytest.raises(SimulatedCrash):
        engine_a.drive("r3")
    assert steplog("r3") == ["s0"]

    # Live holder: the driver's scans leave the run alone.
    assert driver.run_until_idle() == {}
    assert claim_of("r3") == (1, engine_a.engine_id)

    expire_lease(engine_a)
    assert driver.run_until_idle() == {"completed": 1}
    assert steplog("r3") == ["s0", "s1", "s2", "s3"]
    assert dict(CALLS) == {"s0": 1, "s1": 1, "s2": 1, "s3": 1}
    engines = [engine for _s, _k, _n, engine, _e in history("r3")]
    assert engines == [engine_a.engine_id] + [driver.engine.engine_id] * 3


def test_each_turn_replays_history_in_order(driver: WorkflowDriver) -> None:
    weft.start("tests.collect_signals", "item", 3, workflow_id="r4")
    driver.run_until_idle()
    for value in ("a", "b", "c"):
        weft.signal("r4", "item", value)
        driver.run_until_idle()
    assert weft.result("r4", timeout=0) == ["a", "b", "c"]
    assert kinds("r4") == [
        ("wait", "signal:item"),
        ("signal", "item"),
        ("wait", "signal:item"),
        ("signal", "item"),
        ("wait", "signal:item"),
        ("signal", "item"),
    ]


def test_a_gap_in_recorded_history_poisons_the_replay() -> None:
    replay = Replay("gappy", [Event(0, "step", "a"), Event(2, "step", "b")])
    assert isinstance(replay.poisoned, NonDeterminismError)
    assert "a gap" in str(replay.poisoned)
    with pytest.raises(NonDeterminismError):
        replay.peek()
    assert Replay("fine", [Event(0, "step", "a"), Event(1, "step", "b")]).poisoned is None
