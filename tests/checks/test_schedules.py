"""The schedules' system checks: weft.E030 to E033, and the worker's refusal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import weft_django as weft
from weft_django import Context
from weft_django.checks.schedules import check_schedules
from weft_django.exceptions import WeftConfigurationError
from weft_django.schedules import declare


@weft.workflow(name="tcs.job")
def tcs_job(ctx: Context, size: int) -> int:
    return size


def ids(**schedules: Any) -> list[str]:
    return [message.id for message in check_schedules()]


@pytest.mark.parametrize(
    ("entry", "check_id"),
    [
        ({"workflow": "tcs.job", "cron": "61 * * * *", "args": [1]}, "weft.E030"),
        (
            {"workflow": "tcs.job", "cron": "* * * * *", "timezone": "Mars/Base", "args": [1]},
            "weft.E030",
        ),
        (
            {"workflow": "tcs.job", "cron": "* * * * *", "catch_up": "some", "args": [1]},
            "weft.E030",
        ),
        ({"workflow": "tcs.job", "cron": "* * * * *", "overlap": "x", "args": [1]}, "weft.E030"),
        ({"workflow": "tcs.job", "cron": "* * * * *", "when": 1}, "weft.E031"),
        ({"cron": "* * * * *"}, "weft.E031"),
        ({"workflow": "tests.checks.test_schedules.tcs_job", "cron": "* * * * *"}, "weft.E032"),
        ({"workflow": "tcs.job", "cron": "* * * * *"}, "weft.E033"),
    ],
)
def test_bad_settings_schedules(
    weft_settings: Callable[..., None], entry: dict[str, Any], check_id: str
) -> None:
    weft_settings(SCHEDULES={"s": entry})
    messages = check_schedules()
    assert [m.id for m in messages] == [check_id]
    assert messages[0].hint


def test_a_good_schedule_and_no_schedules_pass(weft_settings: Callable[..., None]) -> None:
    assert check_schedules() == []
    weft_settings(SCHEDULES={"s": {"workflow": "tcs.job", "cron": "*/5 * * * *", "args": [2]}})
    assert check_schedules() == []


def test_a_bad_decorated_schedule_is_e030_and_refuses_the_worker() -> None:
    @weft.schedule("not cron", name="tcs-bad")
    @weft.workflow(name="tcs.bad")
    def bad(ctx: Context) -> None:
        return None

    try:
        assert [m.id for m in check_schedules()] == ["weft.E030"]
        with pytest.raises(WeftConfigurationError, match="tcs-bad"):
            declare.declared()
    finally:
        declare.undeclare("tcs-bad")


def test_either_decorator_order_names_the_workflow() -> None:
    @weft.workflow(name="tcs.below")
    @weft.schedule("0 * * * *", name="tcs-below")
    def below(ctx: Context) -> None:
        return None

    @weft.schedule("0 * * * *", name="tcs-above")
    @weft.workflow(name="tcs.above")
    def above(ctx: Context) -> None:
        return None

    try:
        specs = declare.declared()
        assert specs["tcs-below"].workflow_name == "tcs.below"
        assert specs["tcs-above"].workflow_name == "tcs.above"
        assert check_schedules() == []
        with pytest.raises(WeftConfigurationError, match="declared twice"):
            weft.schedule("0 * * * *", name="tcs-above")(below)
    finally:
        declare.undeclare("tcs-below")
        declare.undeclare("tcs-above")


def test_settings_schedules_not_a_dict(weft_settings: Callable[..., None]) -> None:
    weft_settings(SCHEDULES=["x"])
    assert [m.id for m in check_schedules()] == ["weft.E031"]
