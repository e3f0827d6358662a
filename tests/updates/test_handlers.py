"""Registered update handlers: applied at park points, in arrival order, in history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import weft_django as weft
from weft_django import UpdateRejectedError
from weft_django.models import RunStatus, UpdateRequest, UpdateStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership.claims.results import Acquired
from weft_django.runtime.engine import TurnOutcome
from weft_django.testing import WorkflowDriver

from .conftest import answer, expire_lease, kinds, send, statuses, update_events
from .workflows import CALLS


def test_update_to_a_run_waiting_on_a_signal_is_applied_and_the_run_keeps_waiting(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.counter", workflow_id="h1")
    assert driver.run_until_idle() == {"parked": 1}
    parked = WorkflowRun.objects.get(pk="h1")
    assert parked.waiting_on == {"kind": "signal", "name": "done", "deadline": None}

    update_id = send("h1", "add", 5)
    assert UpdateRequest.objects.get(update_id=update_id).status == UpdateStatus.PENDING
    assert WorkflowRun.objects.get(pk="h1").wake_hint_at is not None
    assert weft.describe("h1").pending_updates == 1

    assert driver.run_until_idle() == {"parked": 1}
    assert answer("h1", update_id)["total"] == 5
    request = UpdateRequest.objects.get(update_id=update_id)
    assert request.status == UpdateStatus.APPLIED
    assert request.responded_at is not None and request.expires_at is not None
    run = WorkflowRun.objects.get(pk="h1")
    assert run.status == RunStatus.WAITING
    assert run.waiting_on == {"kind": "signal", "name": "done", "deadline": None}
    assert weft.describe("h1").pending_updates == 0
    assert kinds("h1") == [("wait", "signal:done"), ("update", "add")]
    assert request.applied_seq == 1
    assert update_events("h1") == [
        {"update_id": update_id, "payload": 5, "response": answer("h1", update_id)}
    ]

    weft.signal("h1", "done", "bye")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("h1", timeout=0) == {"items": [5], "total": 5, "signal": "bye"}


def test_pending_requests_are_applied_in_arrival_order(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="h2")
    driver.run_until_idle()
    ids = [send("h2", "add", amount) for amount in (1, 2, 3, 4)]
    assert driver.run_until_idle() == {"parked": 1}
    assert [answer("h2", i)["total"] for i in ids] == [1, 3, 6, 10]
    assert [e["update_id"] for e in update_events("h2")] == ids
    seqs = list(
        UpdateRequest.objects.filter(run_id="h2")
        .order_by("id")
        .values_list("applied_seq", flat=True)
    )
    assert seqs == [1, 2, 3, 4]
    assert weft.query("h2", "items") == {"items": [1, 2, 3, 4], "args": []}


def test_update_to_a_pending_run_is_applied_in_its_first_turn(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="h3")
    update_id = send("h3", "add", 7)  # no state yet: nothing to pre-validate against
    assert driver.run_until_idle() == {"parked": 1}
    assert answer("h3", update_id)["total"] == 7
    # Applied before the wait marker: the wait had to park after the drain.
    assert kinds("h3") == [("update", "add"), ("wait", "signal:done")]
    weft.signal("h3", "done")
    driver.run_until_idle()
    assert weft.result("h3", timeout=0)["items"] == [7]


def test_a_raising_handler_fails_that_update_only(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="h4")
    driver.run_until_idle()
    first = send("h4", "add", 2)
    bad = send("h4", "explode", "x")
    last = send("h4", "add", 3)
    assert driver.run_until_idle() == {"parked": 1}
    assert answer("h4", first)["total"] == 2
    with pytest.raises(UpdateRejectedError) as caught:
        answer("h4", bad)
    assert "handler exploded on 'x'" in str(caught.value)
    assert caught.value.update_id == bad
    assert answer("h4", last)["total"] == 5
    assert statuses("h4") == {
        first: UpdateStatus.APPLIED,
        bad: UpdateStatus.FAILED,
        last: UpdateStatus.APPLIED,
    }
    failed = WorkflowEvent.objects.get(run_id="h4", kind="update", name="explode")
    assert failed.error["type"] == "RuntimeError"
    assert WorkflowRun.objects.get(pk="h4").status == RunStatus.WAITING

    # The failure is history: replaying it (it raises again) does not fail the run.
    applied = CALLS["explode"]
    weft.signal("h4", "done")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("h4", timeout=0)["items"] == [2, 3]
    assert CALLS["explode"] == applied + 1  # re-applied (and raised again) in the replay


def test_updates_are_applied_while_a_durable_timer_runs(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.sleepy", 600, workflow_id="h5")
    assert driver.run_until_idle() == {"parked": 1}
    assert WorkflowRun.objects.get(pk="h5").waiting_on["kind"] == "sleep"
    update_id = send("h5", "add", 4)
    assert driver.run_until_idle() == {"parked": 1}
    assert answer("h5", update_id)["total"] == 4
    run = WorkflowRun.objects.get(pk="h5")
    assert run.status == RunStatus.WAITING and run.waiting_on["kind"] == "sleep"
    assert kinds("h5") == [("sleep", ""), ("update", "add")]
    driver.advance(601)
    assert weft.result("h5", timeout=0) == {"items": [4]}


def test_updates_at_two_park_points_replay_at_their_positions(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter_steps", workflow_id="h6")
    driver.run_until_idle()
    a = send("h6", "add", 1)
    driver.run_until_idle()
    weft.signal("h6", "first", "f")
    driver.run_until_idle()
    b = send("h6", "add", 10)
    driver.run_until_idle()
    assert [answer("h6", a)["total"], answer("h6", b)["total"]] == [1, 11]
    assert kinds("h6") == [
        ("wait", "signal:first"),
        ("update", "add"),
        ("signal", "first"),
        ("step", "between"),
        ("wait", "signal:second"),
        ("update", "add"),
    ]
    weft.signal("h6", "second", "s")
    driver.run_until_idle()
    assert weft.result("h6", timeout=0) == {"items": [1, 10], "signals": ["f", "s"]}


def test_takeover_replays_the_applied_updates_into_the_same_state(
    make_engine: Callable[..., Any],
) -> None:
    engine_a = make_engine()
    weft.start("tests.updates.counter", workflow_id="h7")
    assert isinstance(engine_a.acquire("h7"), Acquired)
    assert engine_a.drive("h7") == TurnOutcome.PARKED
    ids = [send("h7", "add", amount) for amount in (3, 4)]
    assert engine_a.drive("h7") == TurnOutcome.PARKED
    assert [answer("h7", i)["total"] for i in ids] == [3, 7]
    assert weft.query("h7", "items") == {"items": [3, 4], "args": []}

    # A crashes; B takes the run over once A's lease has expired.
    expire_lease(engine_a)
    engine_b = make_engine()
    claimed = engine_b.acquire("h7")
    assert isinstance(claimed, Acquired) and claimed.takeover and claimed.epoch == 2
    late = send("h7", "add", 5)
    before = CALLS["add"]
    assert engine_b.drive("h7") == TurnOutcome.PARKED
    # B re-applied A's two updates from history (no new events), then applied the third
    # to the rebuilt state.
    assert CALLS["add"] == before + 2 + 1
    assert answer("h7", late)["total"] == 12
    assert weft.query("h7", "total") == 12
    events = list(
        WorkflowEvent.objects.filter(run_id="h7", kind="update")
        .order_by("seq")
        .values_list("epoch", "engine_id")
    )
    assert events == [(1, engine_a.engine_id)] * 2 + [(2, engine_b.engine_id)]

    weft.signal("h7", "done", "end")
    assert engine_b.drive("h7") == TurnOutcome.COMPLETED
    assert weft.result("h7", timeout=0) == {"items": [3, 4, 5], "total": 12, "signal": "end"}
    assert weft.query("h7", "items") == {"items": [3, 4, 5], "args": []}


def test_a_deposed_owner_cannot_apply_an_update(make_engine: Callable[..., Any]) -> None:
    engine_a = make_engine()
    weft.start("tests.updates.counter", workflow_id="h8")
    engine_a.acquire("h8")
    engine_a.drive("h8")
    expire_lease(engine_a)
    engine_b = make_engine()
    assert isinstance(engine_b.acquire("h8"), Acquired)
    update_id = send("h8", "add", 1)
    # A still believes it holds the run: its fenced write of the answer fails.
    assert engine_a.drive("h8") == TurnOutcome.DEPOSED
    assert UpdateRequest.objects.get(update_id=update_id).status == UpdateStatus.PENDING
    assert not WorkflowEvent.objects.filter(run_id="h8", kind="update").exists()
    assert engine_b.drive("h8") == TurnOutcome.PARKED
    assert answer("h8", update_id)["total"] == 1
