"""WEFT["QUEUES"] validation (weft.E040-E046) and start()'s typed errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from weft_django import FlowControlError
from weft_django.checks.queues import check_queues
from weft_django.flow.settings import parse_rate, problems, queues
from weft_django.models import WorkflowRun


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (["payments"], "weft.E040"),
        ({"bad name!": {}}, "weft.E041"),
        ({"q": {"concurency": 2}}, "weft.E042"),
        ({"q": "fast"}, "weft.E042"),
        ({"q": {"concurrency": 0}}, "weft.E043"),
        ({"q": {"per_key_concurrency": True}}, "weft.E043"),
        ({"q": {"rate": "20 per second"}}, "weft.E044"),
        ({"q": {"rate": -1}}, "weft.E044"),
        ({"q": {"burst": 0}}, "weft.E044"),
    ],
)
def test_bad_queues_are_named(value: Any, code: str) -> None:
    assert [p.id for p in problems(value, mode="workflow-lease")] == [code]


def test_concurrency_limits_need_per_run_claims() -> None:
    found = problems({"q": {"concurrency": 1}}, mode="lease")
    assert [p.id for p in found] == ["weft.E045"]
    assert problems({"q": {"rate": "5/s"}}, mode="lease") == []


def test_rates_parse() -> None:
    assert parse_rate("20/s") == 20.0
    assert parse_rate("600/m") == 10.0
    assert parse_rate("36/h") == 0.01
    assert parse_rate(2) == 2.0
    assert parse_rate(True) is None


def test_the_configured_queues(weft_settings: Callable[..., None]) -> None:
    assert set(queues()) == {"default", "payments", "mail", "open"}
    assert queues()["payments"].concurrency == 2
    assert queues()["mail"].rate == pytest.approx(1 / 60)
    assert not queues()["open"].limited
    assert check_queues() == []
    weft_settings(QUEUES={"payments": {"concurrency": "many"}})
    assert [m.id for m in check_queues()] == ["weft.E043"]


def test_a_workflow_naming_an_unknown_queue_is_e046(weft_settings: Callable[..., None]) -> None:
    weft_settings(QUEUES={})
    assert {m.id for m in check_queues()} == {"weft.E046"}  # the payments workflows


@pytest.mark.parametrize(
    ("options", "what"),
    [
        ({"queue": "nope"}, "queue"),
        ({"queue": ""}, "queue"),
        ({"queue": 3}, "queue"),
        ({"priority": 101}, "priority"),
        ({"priority": -101}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 1.5}, "priority"),
        ({"concurrency_key": ""}, "concurrency_key"),
        ({"concurrency_key": "k" * 129}, "concurrency_key"),
        ({"concurrency_key": 42}, "concurrency_key"),
    ],
)
def test_bad_flow_input_is_a_typed_error_and_stores_nothing(
    db: None, options: dict[str, Any], what: str
) -> None:
    with pytest.raises(FlowControlError) as raised:
        weft.start("tests.flow.one_step", workflow_id="bad", **options)
    assert raised.value.what == what
    assert isinstance(raised.value, ValueError)
    assert not WorkflowRun.objects.filter(pk="bad").exists()


def test_start_stores_queue_priority_and_key(db: None) -> None:
    weft.start("tests.flow.one_step", workflow_id="a", priority=-100, concurrency_key="c-1")
    weft.start("tests.flow.in_payments", workflow_id="b", priority=100)
    weft.start("tests.flow.in_payments", workflow_id="c", queue="open")
    rows = WorkflowRun.objects.order_by("pk").values_list("queue", "priority", "concurrency_key")
    assert list(rows) == [
        ("default", -100, "c-1"),
        ("payments", 100, None),
        ("open", 0, None),
    ]


def test_a_start_with_flow_control_is_still_one_statement(db: None) -> None:
    with CaptureQueriesContext(connection) as queries:
        weft.start("tests.flow.in_payments", workflow_id="one", priority=7, concurrency_key="k")
    assert len(queries.captured_queries) == 1, [q["sql"] for q in queries.captured_queries]
    run = WorkflowRun.objects.get(pk="one")
    assert (run.queue, run.priority, run.concurrency_key) == ("payments", 7, "k")


def test_start_many_takes_flow_control_per_request(db: None) -> None:
    requests = [
        weft.StartRequest("tests.flow.one_step", workflow_id=f"m{index}", priority=index)
        for index in range(3)
    ] + [weft.StartRequest("tests.flow.in_payments", workflow_id="m3", concurrency_key="c")]
    weft.start_many(requests)
    rows = WorkflowRun.objects.order_by("pk").values_list("queue", "priority", "concurrency_key")
    assert list(rows) == [
        ("default", 0, None),
        ("default", 1, None),
        ("default", 2, None),
        ("payments", 0, "c"),
    ]
    bad = [
        weft.StartRequest("tests.flow.one_step", workflow_id="ok"),
        weft.StartRequest("tests.flow.one_step", workflow_id="bad", priority=101),
    ]
    with pytest.raises(weft.StartManyError) as raised:
        weft.start_many(bad)
    assert isinstance(raised.value.errors[1], FlowControlError)
    assert not WorkflowRun.objects.filter(pk__in=["ok", "bad"]).exists()


def test_retry_keeps_the_runs_flow_control(db: None) -> None:
    weft.start("tests.flow.in_payments", workflow_id="old", priority=-5, concurrency_key="k")
    weft.cancel("old", reason="test")
    new = WorkflowRun.objects.get(pk=weft.retry("old", new_id="new").id)
    assert (new.queue, new.priority, new.concurrency_key) == ("payments", -5, "k")
