"""``ctx.wait_until``: re-checked after each applied update; a timeout returns False."""

from __future__ import annotations

import pytest

import weft_django as weft
from weft_django import WorkflowTerminalError
from weft_django.models import RunStatus, UpdateStatus, WorkflowRun
from weft_django.testing import WorkflowDriver

from .conftest import answer, kinds, send, statuses
from .workflows import STATE


def test_a_true_predicate_returns_at_once_without_parking(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.until", 0, workflow_id="u1")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("u1", timeout=0) == {"reached": True, "n": 0, "after": None}
    assert kinds("u1") == [("until", "")]


def test_each_update_re_checks_the_predicate_until_it_holds(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.until", 3, workflow_id="u2")
    assert driver.run_until_idle() == {"parked": 1}
    run = WorkflowRun.objects.get(pk="u2")
    assert run.status == RunStatus.WAITING
    assert run.waiting_on == {"kind": "until", "deadline": None}

    first = send("u2", "inc", 1)
    assert driver.run_until_idle() == {"parked": 1}
    assert answer("u2", first) == 1
    assert WorkflowRun.objects.get(pk="u2").waiting_on["kind"] == "until"

    second = send("u2", "inc", 2)
    assert driver.run_until_idle() == {"completed": 1}
    assert answer("u2", second) == 3
    assert weft.result("u2", timeout=0) == {"reached": True, "n": 3, "after": None}
    assert kinds("u2") == [
        ("wait", "until"),
        ("update", "inc"),
        ("update", "inc"),
        ("until", ""),
    ]


def test_the_predicate_is_checked_after_each_update_of_one_drain(
    driver: WorkflowDriver,
) -> None:
    """Three requests pending at once for ``n == 2``: the wait ends after the second
    (checking only after all three would see n == 3 and wait forever); the third is
    applied at the run's next park point."""
    STATE["wait_after"] = True
    weft.start("tests.updates.until", 2, workflow_id="u3")
    driver.run_until_idle()
    ids = [send("u3", "inc", 1) for _ in range(3)]
    assert driver.run_until_idle() == {"parked": 1}
    assert [answer("u3", i) for i in ids] == [1, 2, 3]
    assert kinds("u3") == [
        ("wait", "until"),
        ("update", "inc"),
        ("update", "inc"),
        ("until", ""),
        ("update", "inc"),
        ("wait", "signal:after"),
    ]
    weft.signal("u3", "after", "x")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("u3", timeout=0) == {"reached": True, "n": 3, "after": "x"}


def test_requests_after_the_predicate_held_are_refused_when_the_run_ends(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.updates.until", 1, workflow_id="u4")
    driver.run_until_idle()
    hit, extra = send("u4", "inc", 1), send("u4", "inc", 1)
    assert driver.run_until_idle() == {"completed": 1}
    assert answer("u4", hit) == 1
    with pytest.raises(WorkflowTerminalError):
        answer("u4", extra)
    assert statuses("u4")[extra] == UpdateStatus.REJECTED
    assert weft.result("u4", timeout=0)["n"] == 1


def test_wait_until_times_out_with_false(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.until", 5, timeout=30, workflow_id="u5")
    assert driver.run_until_idle() == {"parked": 1}
    assert WorkflowRun.objects.get(pk="u5").waiting_on["deadline"] is not None
    update_id = send("u5", "inc", 1)
    driver.run_until_idle()
    assert answer("u5", update_id) == 1
    assert WorkflowRun.objects.get(pk="u5").status == RunStatus.WAITING
    driver.advance(31)
    assert weft.result("u5", timeout=0) == {"reached": False, "n": 1, "after": None}
    assert kinds("u5")[-1] == ("until", "")


def test_replay_does_not_re_evaluate_a_recorded_result(driver: WorkflowDriver) -> None:
    STATE["wait_after"] = True
    weft.start("tests.updates.until", 1, workflow_id="u6")
    driver.run_until_idle()
    send("u6", "inc", 1)
    driver.run_until_idle()
    assert weft.query("u6", "n") == 1
    # The predicate no longer holds (n == 2), but the recorded True is what replays.
    send("u6", "inc", 1)
    driver.run_until_idle()
    assert weft.query("u6", "n") == 2
    weft.signal("u6", "after", 1)
    driver.run_until_idle()
    assert weft.result("u6", timeout=0) == {"reached": True, "n": 2, "after": 1}
