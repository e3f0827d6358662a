"""Real concurrency on PostgreSQL: callers, drains and engines on separate connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

import weft_django as weft
from tests.concurrency import run_concurrently
from weft_django.models import Engine, UpdateRequest, UpdateStatus, WorkflowEvent
from weft_django.ownership.claims.results import Acquired
from weft_django.ownership.clock import db_now
from weft_django.runtime.engine import TurnOutcome, WorkflowEngine
from weft_django.testing import WorkflowDriver

from .conftest import expire_lease, send

pytestmark = [pytest.mark.postgres, pytest.mark.mysql, pytest.mark.django_db(transaction=True)]

CALLERS = 10


class Drainer:
    """Drive runnable runs on a background thread until stopped."""

    def __init__(self, driver: WorkflowDriver) -> None:
        self.driver = driver
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._loop)

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                self.driver.run_until_idle()
                time.sleep(0.002)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            connection.close()

    def __enter__(self) -> Drainer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.errors, self.errors


def _update_events(run_id: str) -> list[tuple[int, str, int]]:
    rows = WorkflowEvent.objects.filter(run_id=run_id, kind="update").order_by("seq")
    return [(e.seq, e.result["update_id"], e.epoch) for e in rows]


def test_ten_concurrent_callers_are_answered_once_each_in_arrival_order(
    weft_settings: Callable[..., None],
) -> None:
    with WorkflowDriver() as driver:
        weft.start("tests.updates.counter", workflow_id="race1")
        driver.run_until_idle()
        with Drainer(driver):
            responses = run_concurrently(
                *[
                    (lambda i=i: weft.update("race1", "add", 1, update_id=f"c{i}", timeout=30))
                    for i in range(CALLERS)
                ]
            )
        arrival = list(
            UpdateRequest.objects.filter(run_id="race1")
            .order_by("id")
            .values_list("update_id", flat=True)
        )
        assert sorted(arrival) == sorted(f"c{i}" for i in range(CALLERS))
        by_id = {f"c{i}": response for i, response in enumerate(responses)}
        # FIFO: the n-th request to arrive saw n items.
        assert [by_id[update_id]["count"] for update_id in arrival] == list(range(1, CALLERS + 1))
        assert [update_id for _seq, update_id, _e in _update_events("race1")] == arrival
        assert set(
            UpdateRequest.objects.filter(run_id="race1").values_list("status", flat=True)
        ) == {UpdateStatus.APPLIED}
        assert weft.query("race1", "total") == CALLERS


def test_two_racing_turns_of_one_engine_apply_each_request_once(
    weft_settings: Callable[..., None],
) -> None:
    """Both turns replay and drain the same ten requests at once (the engine's
    one-turn-per-run guard bypassed): the conditional answer write and the unique
    (run, seq) make the loser give up, never apply twice."""
    engine = WorkflowEngine(kind="test").start()
    try:
        for attempt in range(3):
            run_id = f"race2-{attempt}"
            weft.start("tests.updates.counter", workflow_id=run_id)
            engine.acquire(run_id)
            engine.drive(run_id)
            ids = [send(run_id, "add", 1) for _ in range(CALLERS)]
            outcomes = run_concurrently(
                lambda r=run_id: engine._drive(r), lambda r=run_id: engine._drive(r)
            )
            assert TurnOutcome.PARKED in outcomes, outcomes
            while UpdateRequest.objects.filter(run_id=run_id, status=UpdateStatus.PENDING).exists():
                engine.drive(run_id)  # a loser may have stopped a drain early
            events = _update_events(run_id)
            assert [update_id for _s, update_id, _e in events] == ids
            totals = [UpdateRequest.objects.get(update_id=i).response["total"] for i in ids]
            assert totals == list(range(1, CALLERS + 1))
            assert weft.query(run_id, "total") == CALLERS
    finally:
        engine.shutdown()


def test_a_deposed_engine_racing_the_new_owner_applies_nothing(
    weft_settings: Callable[..., None],
) -> None:
    engine_a = WorkflowEngine(kind="test").start()
    engine_b = WorkflowEngine(kind="test").start()
    try:
        weft.start("tests.updates.counter", workflow_id="race3")
        engine_a.acquire("race3")
        engine_a.drive("race3")
        ids = [send("race3", "add", 1) for _ in range(CALLERS)]
        expire_lease(engine_a)
        claimed = engine_b.acquire("race3")
        assert isinstance(claimed, Acquired) and claimed.epoch == 2
        # A's lease looks live again: only the fence (the epoch) can stop it now.
        Engine.objects.filter(id=engine_a.engine_id).update(lease_expires_at=db_now())
        outcomes = run_concurrently(
            lambda: engine_a.drive("race3"), lambda: engine_b.drive("race3")
        )
        assert outcomes[0] == TurnOutcome.DEPOSED
        while UpdateRequest.objects.filter(run_id="race3", status=UpdateStatus.PENDING).exists():
            engine_b.drive("race3")
        events = _update_events("race3")
        assert [update_id for _s, update_id, _e in events] == ids
        assert {epoch for _s, _u, epoch in events} == {2}
    finally:
        engine_a.shutdown()
        engine_b.shutdown()


def test_racing_callers_of_two_names_keep_fifo_per_name(
    weft_settings: Callable[..., None],
) -> None:
    with WorkflowDriver() as driver:
        weft.start("tests.updates.cart", workflow_id="race4")
        driver.run_until_idle()
        with Drainer(driver):
            responses = run_concurrently(
                *[
                    (
                        lambda i=i: weft.update(
                            "race4", "add", f"item{i}", update_id=f"a{i}", timeout=30
                        )
                    )
                    for i in range(CALLERS)
                ]
            )
            checkout = weft.update("race4", "checkout", "go", timeout=30)
        arrival = list(
            UpdateRequest.objects.filter(run_id="race4", name="add")
            .order_by("id")
            .values_list("update_id", flat=True)
        )
        by_id = {f"a{i}": response for i, response in enumerate(responses)}
        assert [by_id[u] for u in arrival] == list(range(1, CALLERS + 1))
        assert checkout == {"items": [f"item{u[1:]}" for u in arrival], "note": "go"}
        assert weft.result("race4", timeout=5) == {"items": checkout["items"]}
