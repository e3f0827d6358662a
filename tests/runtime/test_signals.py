"""Signals: buffered, woken, deduplicated, ordered, timed out, refused."""

from __future__ import annotations

import pytest

import weft_django as weft
from weft_django import WorkflowNotFoundError, WorkflowTerminalError
from weft_django.models import RunStatus, WorkflowRun, WorkflowSignal
from weft_django.testing import WorkflowDriver

from .conftest import kinds, steplog
from .workflows import LOG


def test_signal_buffered_before_the_wait_is_consumed_without_parking(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.collect_signals", "approve", 1, workflow_id="sg1")
    weft.signal("sg1", "approve", {"by": "alice"})
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("sg1", timeout=0) == [{"by": "alice"}]
    assert kinds("sg1") == [("signal", "approve")]  # no wait marker: it never parked
    row = WorkflowSignal.objects.get(run_id="sg1")
    assert row.consumed_at is not None and row.consumed_seq == 0


def test_signal_sent_after_the_wait_wakes_the_run(driver: WorkflowDriver) -> None:
    weft.start("tests.collect_signals", "approve", 1, workflow_id="sg2")
    assert driver.run_until_idle() == {"parked": 1}
    run = WorkflowRun.objects.get(pk="sg2")
    assert run.status == RunStatus.WAITING
    assert run.waiting_on == {"kind": "signal", "name": "approve", "deadline": None}
    assert run.wake_at is None
    assert weft.describe("sg2").pending_signals == 0

    weft.signal("sg2", "approve", 7)
    assert WorkflowRun.objects.get(pk="sg2").wake_hint_at is not None
    assert weft.describe("sg2").pending_signals == 1
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("sg2", timeout=0) == [7]
    assert kinds("sg2") == [("wait", "signal:approve"), ("signal", "approve")]
    assert WorkflowSignal.objects.get(run_id="sg2").consumed_seq == 1


def test_signal_of_another_name_does_not_wake_the_wait(driver: WorkflowDriver) -> None:
    weft.start("tests.collect_signals", "approve", 1, workflow_id="sg3")
    driver.run_until_idle()
    weft.signal("sg3", "other", 1)
    assert driver.run_until_idle() == {"parked": 1}
    assert WorkflowRun.objects.get(pk="sg3").status == RunStatus.WAITING
    assert WorkflowSignal.objects.get(run_id="sg3").consumed_at is None


def test_names_and_signal_ids_match_exactly(driver: WorkflowDriver) -> None:
    """Case, accents and trailing spaces count on every database (MariaDB/MySQL's
    default collations ignore them: weft's tables use a binary one there)."""
    weft.start("tests.collect_signals", "approve", 1, workflow_id="sg-exact")
    for name in ("Approve", "approve ", "appröve"):
        weft.signal("sg-exact", name, name)
    weft.signal("sg-exact", "approve", "a", signal_id="Id-1")
    weft.signal("sg-exact", "approve", "b", signal_id="id-1")  # another signal id
    assert WorkflowSignal.objects.filter(run_id="sg-exact").count() == 5
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("sg-exact", timeout=0) == ["a"]
    assert WorkflowSignal.objects.filter(run_id="sg-exact", consumed_at__isnull=True).count() == 4


def test_duplicate_signal_id_is_a_no_op(driver: WorkflowDriver) -> None:
    weft.start("tests.collect_signals", "item", 2, workflow_id="sg4")
    weft.signal("sg4", "item", "first", signal_id="dedupe-1")
    weft.signal("sg4", "item", "second", signal_id="dedupe-1")
    assert WorkflowSignal.objects.filter(run_id="sg4").count() == 1
    assert driver.run_until_idle() == {"parked": 1}  # consumed one, waits for another
    weft.signal("sg4", "item", "third", signal_id="dedupe-1")  # still a no-op
    assert driver.run_until_idle() == {}
    assert WorkflowRun.objects.get(pk="sg4").status == RunStatus.WAITING

    weft.signal("sg4", "item", "fourth", signal_id="dedupe-2")
    driver.run_until_idle()
    assert weft.result("sg4", timeout=0) == ["first", "fourth"]
    # Retrying a delivered signal after the run ended still succeeds as a no-op...
    weft.signal("sg4", "item", "fourth", signal_id="dedupe-2")
    # ...while a new signal to the finished run is refused.
    with pytest.raises(WorkflowTerminalError):
        weft.signal("sg4", "item", "fifth", signal_id="dedupe-3")
    assert WorkflowSignal.objects.filter(run_id="sg4").count() == 2


def test_two_signals_of_one_name_are_consumed_in_order(driver: WorkflowDriver) -> None:
    weft.start("tests.collect_signals", "item", 2, workflow_id="sg5")
    weft.signal("sg5", "item", "one")
    weft.signal("sg5", "item", "two")
    assert driver.run_until_idle() == {"completed": 1}
    assert weft.result("sg5", timeout=0) == ["one", "two"]
    consumed = list(
        WorkflowSignal.objects.filter(run_id="sg5")
        .order_by("id")
        .values_list("payload", "consumed_seq")
    )
    assert consumed == [("one", 0), ("two", 1)]


def test_signal_wait_timeout_is_catchable_inside_the_workflow(driver: WorkflowDriver) -> None:
    weft.start("tests.signal_or_timeout", 60, workflow_id="sg6")
    assert driver.run_until_idle() == {"parked": 1}
    run = WorkflowRun.objects.get(pk="sg6")
    assert run.wake_at is not None
    assert run.waiting_on["deadline"] == run.wake_at.isoformat()

    driver.advance(30)
    assert WorkflowRun.objects.get(pk="sg6").status == RunStatus.WAITING
    driver.advance(31)
    assert weft.result("sg6", timeout=0) == {"timed_out": True, "after": "after_timeout"}
    assert LOG == [("timeout", "WaitTimeoutError", True)]
    assert kinds("sg6") == [
        ("wait", "signal:answer"),
        ("signal", "answer"),
        ("step", "after_timeout"),
    ]
    assert steplog("sg6") == ["after_timeout"]


def test_signal_arriving_before_the_deadline_wins(driver: WorkflowDriver) -> None:
    weft.start("tests.signal_or_timeout", 60, workflow_id="sg7")
    driver.run_until_idle()
    weft.signal("sg7", "answer", 42)
    driver.advance(30)
    assert weft.result("sg7", timeout=0) == {"timed_out": False, "got": 42}
    driver.advance(60)  # the old deadline passing later changes nothing
    assert weft.result("sg7", timeout=0) == {"timed_out": False, "got": 42}


def test_signal_to_a_missing_run(db: None) -> None:
    with pytest.raises(WorkflowNotFoundError) as caught:
        weft.signal("nope", "go", 1)
    assert caught.value.workflow_id == "nope"
    assert WorkflowSignal.objects.count() == 0


def test_signal_to_a_terminal_run(driver: WorkflowDriver) -> None:
    weft.start("tests.echo", 1, workflow_id="sg8")
    driver.run_until_idle()
    with pytest.raises(WorkflowTerminalError) as caught:
        weft.signal("sg8", "go", 1)
    assert caught.value.workflow_id == "sg8"
    assert caught.value.status == RunStatus.COMPLETED
    assert WorkflowSignal.objects.filter(run_id="sg8").count() == 0


def test_handle_signal(driver: WorkflowDriver) -> None:
    handle = weft.start("tests.collect_signals", "x", 1, workflow_id="sg9")
    handle.signal("x", {"via": "handle"}, signal_id="h-1")
    handle.signal("x", {"via": "handle again"}, signal_id="h-1")
    driver.run_until_idle()
    assert handle.result(timeout=0) == [{"via": "handle"}]


class _Deadlock(Exception):
    sqlstate = "40P01"


def _deadlocked() -> Exception:
    from django.db import OperationalError

    error = OperationalError("deadlock detected")
    error.__cause__ = _Deadlock("deadlock detected")
    return error


@pytest.mark.django_db(transaction=True)
def test_a_delivery_that_deadlocks_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server rolled the whole delivery back: it runs again, and stores once."""
    from weft_django.runtime import inbox

    weft.start("tests.collect_signals", "approve", 1, workflow_id="sg-deadlock")
    real, calls = inbox._deliver_once, []

    def first_deadlocks(*args: object) -> None:
        calls.append(args)
        if len(calls) == 1:
            raise _deadlocked()
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(inbox, "_deliver_once", first_deadlocks)
    weft.signal("sg-deadlock", "approve", 1)
    assert len(calls) == 2
    assert WorkflowSignal.objects.filter(run_id="sg-deadlock").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_delivery_inside_the_callers_transaction_is_not_run_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside the caller's transaction the rollback is the caller's: the error goes up."""
    from django.db import OperationalError, transaction

    from weft_django.runtime import inbox

    weft.start("tests.collect_signals", "approve", 1, workflow_id="sg-deadlock-2")
    calls = []

    def deadlocks(*args: object) -> None:
        calls.append(args)
        raise _deadlocked()

    monkeypatch.setattr(inbox, "_deliver_once", deadlocks)
    with pytest.raises(OperationalError), transaction.atomic():
        weft.signal("sg-deadlock-2", "approve", 1)
    assert len(calls) == 1
    assert not WorkflowSignal.objects.filter(run_id="sg-deadlock-2").exists()
