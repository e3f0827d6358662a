"""Ids and names: one rule for every id and name that reaches a column, checked at
the call (the public verbs, and ``ctx`` operations in workflow code), the same on
every database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import weft_django as weft
from weft_django import InvalidIdError
from weft_django.models import (
    Claim,
    RunStatus,
    UpdateRequest,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from weft_django.runtime.payload import CHILD_ID, RUN_ID, SIGNAL_NAME, check_id, id_limit
from weft_django.testing import WorkflowDriver

from .conftest import kinds
from .workflows import CALLS, LOG

LONG_ID = "o" * 250  # valid, but "<id>/fulfil" and "<id>/child-0" are not


def _nothing_stored() -> None:
    assert WorkflowRun.objects.count() == 0
    assert WorkflowEvent.objects.count() == 0
    assert WorkflowSignal.objects.count() == 0
    assert UpdateRequest.objects.count() == 0
    assert Claim.objects.count() == 0


# -- the rule -----------------------------------------------------------------------


def test_the_limit_is_the_columns_max_length(db: None) -> None:
    assert id_limit(RUN_ID) == WorkflowRun._meta.get_field("id").max_length == 255
    assert id_limit(SIGNAL_NAME) == WorkflowSignal._meta.get_field("name").max_length
    assert id_limit(CHILD_ID) == WorkflowEvent._meta.get_field("name").max_length


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (42, "must be a string, not int"),
        ("", "must not be empty"),
        ("x" * 256, "is 256 characters long, over the limit of 255"),
        ("\U0001f600" * 256, "is 256 characters long, over the limit of 255"),
        ("a\x00b", "must not hold a NUL character"),
        ("\ud800", "unpaired UTF-16 surrogate"),
        ("order-\udfff", "unpaired UTF-16 surrogate"),
        ("\ud83d\ude00", "unpaired UTF-16 surrogate"),  # a pair as two code points
        ("\u200b", "must hold a visible character"),  # zero-width space (Cf)
        ("\u200b\u2060\ufeff\u200d", "must hold a visible character"),
        (" \t\n\u3000\u00a0", "must hold a visible character"),  # Zs and Cc
        ("\x01\x7f", "must hold a visible character"),
    ],
)
def test_check_id_refuses_with_a_value_error_naming_the_parameter(
    db: None, value: Any, reason: str
) -> None:
    with pytest.raises(ValueError, match=r"^signal_id ") as caught:
        check_id(value, "signal_id")
    assert isinstance(caught.value, InvalidIdError)
    assert caught.value.what == "signal_id"
    assert caught.value.limit == 255
    assert reason in caught.value.reason
    assert "1 to 255 characters" in str(caught.value)


@pytest.mark.parametrize(
    "value", ["x" * 255, "\U0001f600" * 255, " order 42 ", "\u200ba", "é", "a\tb", "0"]
)
def test_check_id_accepts_what_a_column_holds(db: None, value: str) -> None:
    assert check_id(value) is value


def test_an_id_at_the_limit_round_trips(db: None) -> None:
    for run_id in ("x" * 255, "\U0001f600" * 255):
        weft.start("tests.echo", workflow_id=run_id)
        assert weft.describe(run_id).workflow_id == run_id
        weft.signal(run_id, run_id, signal_id=run_id)
        assert WorkflowSignal.objects.get(run_id=run_id).signal_id == run_id


# -- every verb, before the database ------------------------------------------------

VERBS: dict[str, Callable[[str], Any]] = {
    "start": lambda run_id: weft.start("tests.echo", workflow_id=run_id),
    "signal": lambda run_id: weft.signal(run_id, "go"),
    "update": lambda run_id: weft.update(run_id, "add", 1, timeout=0),
    "query": lambda run_id: weft.query(run_id, "total"),
    "cancel": weft.cancel,
    "suspend": weft.suspend,
    "resume": weft.resume,
    "purge": weft.purge,
    "describe": weft.describe,
    "get_handle": weft.get_handle,
    "result": lambda run_id: weft.result(run_id, timeout=0),
}


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("bad_id", ["a\x00b", "\x00", "a\ud800", "\u200b", "x" * 256])
def test_every_verb_refuses_a_bad_id_the_same_on_every_database(
    db: None, verb: str, bad_id: str
) -> None:
    with pytest.raises(InvalidIdError) as caught:
        VERBS[verb](bad_id)
    assert caught.value.what == "workflow_id"
    assert str(caught.value).startswith("workflow_id ")
    _nothing_stored()


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda: weft.signal("n1", "a\x00"), "signal name"),
        (lambda: weft.signal("n1", "\u200b"), "signal name"),
        (lambda: weft.signal("n1", "go", signal_id="\udc80"), "signal_id"),
        (lambda: weft.signal("n1", "go", signal_id="s" * 256), "signal_id"),
        (lambda: weft.update("n1", "\ud800", timeout=0), "update name"),
        (lambda: weft.update("n1", "add", 1, update_id="\x00", timeout=0), "update_id"),
        (lambda: weft.query("n1", "\ufeff"), "query name"),
        (lambda: weft.query("n1", "q" * 256), "query name"),
    ],
)
def test_names_and_their_ids_are_refused_naming_the_parameter(
    db: None, call: Callable[[], Any], what: str
) -> None:
    weft.start("tests.collect_signals", "go", 1, workflow_id="n1")
    with pytest.raises(InvalidIdError) as caught:
        call()
    assert caught.value.what == what
    assert str(caught.value).startswith(f"{what} ")
    assert WorkflowSignal.objects.count() == 0
    assert UpdateRequest.objects.count() == 0


def test_a_lone_surrogate_names_the_parameter(db: None) -> None:
    with pytest.raises(ValueError, match=r"^workflow_id must not hold an unpaired UTF-16"):
        weft.start("tests.echo", workflow_id="order-\ud800")
    _nothing_stored()


def test_an_id_of_a_zero_width_space_is_refused(db: None) -> None:
    with pytest.raises(ValueError, match=r"^workflow_id must hold a visible character"):
        weft.start("tests.echo", workflow_id="\u200b")
    _nothing_stored()


# -- start_at -------------------------------------------------------------------------


def test_start_at_whose_deadline_overflows_is_refused(db: None) -> None:
    start_at = datetime(9999, 12, 31, 23, 59, 30, tzinfo=UTC)
    with pytest.raises(ValueError, match=r"^start_at 9999-12-31T23:59:30\+00:00 .*timeout of 60 s"):
        weft.start("tests.with_timeout", workflow_id="late", start_at=start_at)
    _nothing_stored()


@pytest.mark.parametrize(
    "start_at",
    [
        datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5))),
        datetime(1, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=5))),
    ],
)
def test_start_at_outside_utcs_range_is_refused(db: None, start_at: datetime) -> None:
    with pytest.raises(ValueError, match=r"^start_at .* is out of range"):
        weft.start("tests.echo", workflow_id="odd", start_at=start_at)
    _nothing_stored()


def test_start_at_near_the_end_of_time_without_a_timeout_is_stored(db: None) -> None:
    start_at = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    weft.start("tests.echo", workflow_id="patient", start_at=start_at)
    assert WorkflowRun.objects.get(pk="patient").start_at == start_at


# -- in workflow code -----------------------------------------------------------------


def _failed_with_invalid_id(run_id: str) -> str:
    run = WorkflowRun.objects.get(pk=run_id)
    assert run.status == RunStatus.FAILED
    assert run.error["type"] == "InvalidIdError"
    return str(run.error["message"])


def test_the_example_workflows_child_of_a_long_id_fails_the_run_cleanly(
    driver: WorkflowDriver,
) -> None:
    weft.start("orders.approve_order", 7, workflow_id=LONG_ID)
    assert driver.run_until_idle() == {"parked": 1}
    weft.signal(LONG_ID, "decision", {"status": "approved"})
    assert driver.run_until_idle() == {"failed": 1}
    message = _failed_with_invalid_id(LONG_ID)
    assert message.startswith("child workflow_id is 257 characters long, over the limit of 255")
    assert WorkflowRun.objects.count() == 1  # no child, not even half of one
    assert not WorkflowRun.objects.filter(parent_id=LONG_ID).exists()
    assert "child_start" not in [kind for kind, _name in kinds(LONG_ID)]


def test_a_derived_child_id_too_long_fails_the_run_cleanly(driver: WorkflowDriver) -> None:
    weft.start("tests.parent", "tests.child_add", 1, workflow_id=LONG_ID)
    assert driver.run_until_idle() == {"failed": 1}
    message = _failed_with_invalid_id(LONG_ID)
    assert message.startswith("child workflow_id (derived from this run's id")
    assert WorkflowRun.objects.count() == 1
    assert kinds(LONG_ID) == []


def test_refusals_caught_by_the_workflow_replay_the_same(driver: WorkflowDriver) -> None:
    weft.start("tests.long_ids_caught", workflow_id=LONG_ID)
    assert driver.run_until_idle() == {"parked": 1}
    assert CALLS["noop"] == 0
    weft.signal(LONG_ID, "go")
    driver.run_until_idle()
    assert weft.result(LONG_ID, timeout=0) == {
        "refused": [
            "child workflow_id (derived from this run's id; pass a shorter one)",
            "child workflow_id",
            "step name",
        ],
        "result": 102,
    }


def test_a_step_name_of_300_characters_fails_the_run_cleanly(driver: WorkflowDriver) -> None:
    weft.start("tests.long_step_name", 300, workflow_id="s300")
    assert driver.run_until_idle() == {"failed": 1}
    message = _failed_with_invalid_id("s300")
    assert message.startswith("step name is 300 characters long, over the limit of 255")
    assert CALLS["noop"] == 0
    assert kinds("s300") == []


def test_a_step_name_of_255_characters_replays(driver: WorkflowDriver) -> None:
    weft.start("tests.long_step_name", 255, workflow_id="s255")
    driver.run_until_idle()
    assert WorkflowRun.objects.get(pk="s255").status == RunStatus.COMPLETED
    assert kinds("s255") == [("step", "n" * 255)]


def test_a_wait_for_a_long_signal_name_replays(driver: WorkflowDriver) -> None:
    """Its marker ``signal:<name>`` is longer than the column: cut as it is stored."""
    name = "s" * 255
    weft.start("tests.collect_signals", name, 1, workflow_id="w1")
    assert driver.run_until_idle() == {"parked": 1}
    weft.signal("w1", name, "hello")
    driver.run_until_idle()
    assert weft.result("w1", timeout=0) == ["hello"]


def test_a_child_with_an_id_of_255_characters_replays(driver: WorkflowDriver) -> None:
    child_id = "k" * 255
    weft.start("tests.parent", "tests.child_add", 1, child_id=child_id, workflow_id="c1")
    driver.run_until_idle()
    assert weft.result("c1", timeout=0) == {"child": child_id, "result": 101}


@pytest.mark.parametrize(("steps", "child"), [(8, "child-9"), (9, None)])
def test_a_derived_child_id_is_checked_at_its_seq_live_and_on_replay(
    driver: WorkflowDriver, steps: int, child: str | None
) -> None:
    """A 247-character run id: ``/child-9`` makes 255 characters, ``/child-10`` 256."""
    run_id = "p" * 247
    weft.start("tests.child_after_steps", steps, workflow_id=run_id)
    driver.run_until_idle()
    weft.signal(run_id, "go")
    driver.run_until_idle()
    expected = f"{run_id}/{child}" if child else None
    assert weft.result(run_id, timeout=0) == {"child": expected}
    assert WorkflowRun.objects.filter(parent_id=run_id).count() == (1 if child else 0)
    refused = ["child workflow_id (derived from this run's id; pass a shorter one)"]
    logged = list(LOG)
    assert logged == ([] if child else refused * 2)  # the first execution, then the replay
