"""The worker's default log handler, its log lines and the shutdown grace, in-process
(the real-process side: tests/integration/test_worker_logs.py)."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

import weft_django as weft
from weft_django import Context
from weft_django.models import Claim, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership.passes.reclaim import log_taken
from weft_django.worker import Worker
from weft_django.worker.logs import DEFAULT_FORMAT, ensure_handler, has_handler, summarize

from ..workers import Running, wait_for

RELEASE = threading.Event()
STEPS_RUN: Counter[str] = Counter()


def _blocked() -> int:
    """Workflow code that never reaches a ctx operation until the test lets it go."""
    RELEASE.wait(30)
    return 0


def _count(name: str) -> int:
    STEPS_RUN[name] += 1
    threading.Event().wait(0.01)
    return 0


@weft.workflow(name="twl.blocked")
def twl_blocked(ctx: Context) -> int:
    ctx.step(_blocked, name="blocked")
    return ctx.step(_count, "after", name="after")


@weft.workflow(name="twl.many")
def twl_many(ctx: Context, n: int = 300) -> int:
    for index in range(n):
        ctx.step(_count, f"s{index}", name=f"s{index}")
    return n


# -- the default handler ------------------------------------------------------------


@pytest.fixture
def bare_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """The ``weft_django`` logger without handlers, its level restored after; a test
    also calls :func:`_no_root_handlers` (pytest puts its own on the root for the
    test's body)."""
    logger = logging.getLogger("weft_django")
    monkeypatch.setattr(logger, "handlers", [])
    level = logger.level
    yield logger
    logger.setLevel(level)


def _no_root_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a project without a LOGGING setting has: no handler on the root."""
    monkeypatch.setattr(logging.root, "handlers", [])


def test_no_handler_anywhere_gets_a_stderr_handler_at_info(bare_logging, monkeypatch):
    _no_root_handlers(monkeypatch)
    assert not has_handler()
    handler = ensure_handler(None)
    assert handler is not None and bare_logging.handlers == [handler]
    assert isinstance(handler, logging.StreamHandler)
    assert handler.formatter is not None and handler.formatter._fmt == DEFAULT_FORMAT
    assert bare_logging.level == logging.INFO
    assert has_handler()


def test_log_level_sets_the_level_of_the_added_handler(bare_logging, monkeypatch):
    _no_root_handlers(monkeypatch)
    assert ensure_handler("DEBUG") is not None
    assert bare_logging.level == logging.DEBUG


def test_a_configured_handler_is_left_alone(bare_logging, monkeypatch):
    project = logging.StreamHandler()
    monkeypatch.setattr(logging.root, "handlers", [project])
    bare_logging.setLevel(logging.ERROR)
    assert ensure_handler(None) is None
    assert bare_logging.handlers == [] and logging.root.handlers == [project]
    assert bare_logging.level == logging.ERROR  # no --log-level: not even the level
    assert ensure_handler("WARNING") is None
    assert bare_logging.level == logging.WARNING and bare_logging.handlers == []


def test_a_handler_below_or_above_counts_and_propagate_false_stops(bare_logging, monkeypatch):
    _no_root_handlers(monkeypatch)
    child = logging.getLogger("weft_django.worker")
    monkeypatch.setattr(child, "handlers", [logging.NullHandler()])
    assert has_handler()
    monkeypatch.setattr(child, "handlers", [])
    monkeypatch.setattr(logging.root, "handlers", [logging.NullHandler()])
    assert has_handler()
    monkeypatch.setattr(bare_logging, "propagate", False)
    assert not has_handler()


def test_summarize_lists_ten_then_counts():
    assert summarize(["a", "b"]) == "a, b"
    ids = [f"r{i}" for i in range(12)]
    assert summarize(ids) == ", ".join(ids[:10]) + " and 2 more"


def test_takeovers_are_one_line_each_or_one_for_a_batch(caplog):
    caplog.set_level(logging.INFO, logger="weft_django.reclaim")
    log_taken("eng-a", {"r1": 3, "r2": 5})
    assert [r.getMessage() for r in caplog.records] == [
        "took over run r1 from engine eng-a at epoch 3",
        "took over run r2 from engine eng-a at epoch 5",
    ]
    caplog.clear()
    log_taken("eng-b", {f"r{i}": 2 + i % 3 for i in range(11)})
    assert [r.getMessage() for r in caplog.records] == [
        "took over 11 runs from engine eng-b (epochs 2..4)"
    ]
    caplog.clear()
    log_taken(None, {"r9": 2})
    assert caplog.records[0].getMessage() == (
        "reclaimed run r9 from no holder (released or never claimed) at epoch 2"
    )


# -- the shutdown grace ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_past_the_grace_a_turn_stops_at_its_next_step_and_resumes_elsewhere(fast, caplog):
    caplog.set_level(logging.INFO, logger="weft_django")
    STEPS_RUN.clear()
    run_id = weft.start("twl.many", 300, workflow_id="halt-1").id
    running = Running(Worker(install_signal_handlers=False, concurrency=1, shutdown_grace=0.2))
    running.wait_started()
    events = WorkflowEvent.objects.filter(run_id=run_id, kind="step")
    wait_for(lambda: events.count() >= 5, 10, "some steps")
    running.stop()
    recorded = events.count()
    assert 0 < recorded < 300
    assert "stopped 1 turn(s) at their next operation after the 0.2s shutdown grace" in caplog.text
    assert "released 1 claim(s): halt-1" in caplog.text
    run = WorkflowRun.objects.get(pk=run_id)
    assert run.status == RunStatus.RUNNING and run.error is None  # not a failure
    assert Claim.objects.get(workflow_id=run_id).holder_id is None
    assert sum(STEPS_RUN.values()) == recorded  # no step ran without its checkpoint

    again = Running(Worker(install_signal_handlers=False, concurrency=1))
    again.wait_started()
    wait_for(
        lambda: WorkflowRun.objects.get(pk=run_id).status == RunStatus.COMPLETED, 30, "the end"
    )
    again.stop()
    assert set(STEPS_RUN.values()) == {1} and len(STEPS_RUN) == 300


@pytest.mark.django_db(transaction=True)
def test_a_turn_blocked_in_workflow_code_is_left_behind_and_said_so(fast, caplog):
    caplog.set_level(logging.INFO, logger="weft_django")
    RELEASE.clear()
    STEPS_RUN.clear()
    run_id = weft.start("twl.blocked", workflow_id="stuck-1").id
    running = Running(Worker(install_signal_handlers=False, concurrency=1, shutdown_grace=0.1))
    running.wait_started()
    engine = running.worker.engine
    wait_for(lambda: engine.in_flight_ids() == {run_id}, 10, "the blocked turn")
    try:
        running.stop()
        assert "1 turn(s) did not reach a ctx operation" in caplog.text
        assert "stuck-1" in caplog.text
        assert "stopped 1 turn(s)" not in caplog.text
        # Its claim was released with the others (no lock held: not a
        # transactional step), so another worker can take it.
        assert Claim.objects.get(workflow_id=run_id).holder_id is None
    finally:
        RELEASE.set()
    # Let go, the left-behind turn's checkpoint is refused by the fence (the claim
    # is no longer its) and nothing after it runs.
    wait_for(lambda: not engine.in_flight_ids(), 10, "the left-behind turn to end")
    assert STEPS_RUN["after"] == 0
    assert not WorkflowEvent.objects.filter(run_id=run_id).exists()
