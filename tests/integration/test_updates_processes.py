"""Updates and queries across processes: the caller owns nothing, a worker holds the run.

The test process is the caller (``weft.update`` / ``weft.query``); the run is
held by a ``manage.py weft_worker`` subprocess running
``tests.updates.worker_settings`` (the integration settings plus the update
tests' workflows) with the short timings of ``helpers.FAST`` (renew interval
1 s, claim TTL 3 s).
"""

from __future__ import annotations

import signal
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from tests.integration.helpers import FAST
from tests.integration.queries import holder
from tests.updates import workflows as update_workflows  # noqa: F401 (registers them here)
from weft_django.models import RunStatus, UpdateRequest, UpdateStatus, WorkflowEvent, WorkflowRun

pytestmark = [
    pytest.mark.integration,
    pytest.mark.postgres,
    pytest.mark.mysql,
    pytest.mark.django_db(transaction=True),
]

SETTINGS = "tests.updates.worker_settings"
RENEW = float(FAST["WEFT_CLAIM_RENEW_INTERVAL"])
TAKEOVER = float(FAST["WEFT_CLAIM_TTL"]) + 3 * RENEW


def _parked_on(workers: Any, wait: Callable[..., Any], run_id: str, process: Any) -> None:
    wait(
        lambda: (
            WorkflowRun.objects.filter(pk=run_id, status=RunStatus.WAITING).exists()
            and holder(run_id) == process.engine_id
        ),
        30,
        what=f"{run_id} to park on {process.name}",
    )


def _update_events(run_id: str, update_id: str | None = None) -> list[WorkflowEvent]:
    events = WorkflowEvent.objects.filter(run_id=run_id, kind="update").order_by("seq")
    return [e for e in events if update_id is None or e.result["update_id"] == update_id]


def _listeners() -> int:
    """Connections to this (test) database whose last statement was a LISTEN."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query ILIKE 'LISTEN %%'"
        )
        return cursor.fetchone()[0]


class Caller(threading.Thread):
    """``weft.update`` on its own thread (and connection)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.args, self.kwargs = args, kwargs
        self.result: Any = None
        self.error: BaseException | None = None
        self.elapsed = 0.0

    def run(self) -> None:
        began = time.monotonic()
        try:
            self.result = weft.update(*self.args, **self.kwargs)
        except BaseException as exc:
            self.error = exc
        finally:
            self.elapsed = time.monotonic() - began
            connection.close()

    def outcome(self, timeout: float) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the caller is still waiting"
        if self.error is not None:
            raise self.error
        return self.result


def _round_trips(run_id: str, count: int, pid: int) -> list[float]:
    timings = []
    for index in range(count):
        began = time.monotonic()
        response = weft.update(run_id, "add", 1, timeout=10)
        timings.append(time.monotonic() - began)
        assert response["count"] == index + 1 and response["pid"] == pid
    return timings


def test_an_update_is_answered_within_one_renew_interval_without_notify(
    workers: Any, wait: Callable[..., Any], settings: Any
) -> None:
    settings.WEFT = {**settings.WEFT, "NOTIFY": False}  # the caller sends no NOTIFY either
    worker = workers.start(settings=SETTINGS, WEFT_NOTIFY="false")
    weft.start("tests.updates.counter", workflow_id="xp1")
    _parked_on(workers, wait, "xp1", worker)

    timings = _round_trips("xp1", 10, worker.pid)
    p50, worst = statistics.median(timings) * 1000, max(timings) * 1000
    print(f"NOTIFY off: p50 {p50:.0f} ms, max {worst:.0f} ms")
    assert max(timings) < RENEW, timings
    assert len(_update_events("xp1")) == 10
    if connection.vendor == "postgresql":
        assert _listeners() == 0
    # The turn that answered goes on to park the run again, still on its signal.
    _parked_on(workers, wait, "xp1", worker)
    run = WorkflowRun.objects.get(pk="xp1")
    assert run.waiting_on == {"kind": "signal", "name": "done", "deadline": None}


@pytest.mark.postgres  # LISTEN/NOTIFY
def test_an_update_is_answered_at_once_with_notify(workers: Any, wait: Callable[..., Any]) -> None:
    # A fast tick as slow as a renew interval: only NOTIFY can answer faster than that.
    worker = workers.start(settings=SETTINGS, WEFT_NOTIFY="true", WEFT_TICK_INTERVAL="1")
    weft.start("tests.updates.counter", workflow_id="xp2")
    _parked_on(workers, wait, "xp2", worker)

    assert _listeners() == 1
    timings = _round_trips("xp2", 20, worker.pid)
    p50 = statistics.median(timings)
    print(f"NOTIFY on: p50 {p50 * 1000:.0f} ms, max {max(timings) * 1000:.0f} ms")
    assert p50 < 0.5 * RENEW, timings
    assert len(_update_events("xp2")) == 20


def test_a_request_without_a_wake_hint_is_drained_by_the_owners_update_poll(
    workers: Any, wait: Callable[..., Any]
) -> None:
    """Pass 4 is the floor: a request stored with no wake hint and no NOTIFY (as if
    both were lost) is still applied within about one renew interval."""
    worker = workers.start(settings=SETTINGS)
    weft.start("tests.updates.counter", workflow_id="xp7")
    _parked_on(workers, wait, "xp7", worker)
    time.sleep(2 * RENEW)  # let the worker settle into its pass cadence
    stored = time.monotonic()
    UpdateRequest.objects.create(run_id="xp7", update_id="hintless", name="add", payload=4)
    assert WorkflowRun.objects.get(pk="xp7").wake_hint_at is None
    wait(
        lambda: UpdateRequest.objects.filter(
            update_id="hintless", status=UpdateStatus.APPLIED
        ).exists(),
        5 * RENEW,
        interval=0.01,
        what="the update poll to apply the request",
    )
    elapsed = time.monotonic() - stored
    print(f"applied by the update poll {elapsed * 1000:.0f} ms after it was stored")
    assert elapsed < RENEW + 0.75, elapsed
    assert weft.update("xp7", "add", 4, update_id="hintless", timeout=0)["total"] == 4


def test_an_owner_killed_mid_update_is_replaced_and_the_update_applied_once(
    workers: Any, wait: Callable[..., Any]
) -> None:
    first = workers.start("first", settings=SETTINGS)
    weft.start("tests.updates.slow_handler", 6.0, workflow_id="xp3")
    _parked_on(workers, wait, "xp3", first)

    caller = Caller("xp3", "add", 5, timeout=60, update_id="mid-update")
    caller.start()
    # The request is stored with a wake hint, which the owner's fast tick finds at
    # once; its turn then sits in the 6 s handler. The hint stays until the turn
    # parks, so the kill below cuts the turn off with the hint still there.
    wait(
        lambda: UpdateRequest.objects.filter(run_id="xp3", update_id="mid-update").exists(),
        10,
        what="the update request to be stored",
    )
    time.sleep(2.0)
    assert WorkflowRun.objects.get(pk="xp3").wake_hint_at is not None
    killed_at = first.send(signal.SIGKILL)
    first.wait(10)
    assert UpdateRequest.objects.get(update_id="mid-update").status == UpdateStatus.PENDING
    assert _update_events("xp3") == []

    second = workers.start("second", settings=SETTINGS)
    response = caller.outcome(TAKEOVER + 30)
    answered_after = time.monotonic() - killed_at
    print(f"answered {answered_after:.1f}s after the kill")
    assert response == {"total": 5, "pid": second.pid}
    assert len(_update_events("xp3", "mid-update")) == 1
    assert UpdateRequest.objects.get(update_id="mid-update").status == UpdateStatus.APPLIED
    assert holder("xp3") == second.engine_id
    assert weft.query("xp3", "total") == 5


def test_an_update_sent_while_the_owner_is_dead_is_answered_by_the_new_owner_once(
    workers: Any, wait: Callable[..., Any]
) -> None:
    first = workers.start("first", settings=SETTINGS)
    weft.start("tests.updates.counter", workflow_id="xp4")
    _parked_on(workers, wait, "xp4", first)
    assert weft.update("xp4", "add", 2, timeout=10)["pid"] == first.pid

    first.send(signal.SIGKILL)
    first.wait(10)
    caller = Caller("xp4", "add", 3, timeout=60, update_id="orphan")
    caller.start()
    wait(lambda: UpdateRequest.objects.filter(update_id="orphan").exists(), 10, what="request")
    second = workers.start("second", settings=SETTINGS)
    response = caller.outcome(TAKEOVER + 30)
    assert response["pid"] == second.pid
    assert response["total"] == 5  # the new owner rebuilt the first update from history
    assert len(_update_events("xp4", "orphan")) == 1
    assert len(_update_events("xp4")) == 2

    weft.signal("xp4", "done", "end")
    assert weft.result("xp4", timeout=30) == {"items": [2, 3], "total": 5, "signal": "end"}


def test_ten_concurrent_callers_against_a_worker_are_answered_once_in_order(
    workers: Any, wait: Callable[..., Any]
) -> None:
    worker = workers.start(settings=SETTINGS)
    weft.start("tests.updates.counter", workflow_id="xp5")
    _parked_on(workers, wait, "xp5", worker)
    callers = [Caller("xp5", "add", 1, timeout=30, update_id=f"c{i}") for i in range(10)]
    for caller in callers:
        caller.start()
    responses = {caller.kwargs["update_id"]: caller.outcome(40) for caller in callers}
    arrival = list(
        UpdateRequest.objects.filter(run_id="xp5")
        .order_by("id")
        .values_list("update_id", flat=True)
    )
    assert [responses[u]["count"] for u in arrival] == list(range(1, 11))
    assert [e.result["update_id"] for e in _update_events("xp5")] == arrival


def test_a_query_from_this_process_while_the_worker_is_mid_turn(
    workers: Any, wait: Callable[..., Any]
) -> None:
    worker = workers.start(settings=SETTINGS)
    weft.start("tests.updates.stepper", workflow_id="xp6")
    _parked_on(workers, wait, "xp6", worker)
    assert weft.query("xp6", "seen") == ["one"]

    weft.signal("xp6", "nap", 3.0)  # the worker's next turn sleeps 3 s inside a step
    wait(
        lambda: WorkflowRun.objects.filter(pk="xp6", status=RunStatus.RUNNING).exists(),
        10,
        what="the worker to start its turn",
    )
    with CaptureQueriesContext(connection) as captured:
        assert weft.query("xp6", "seen") == ["one"]
    assert WorkflowRun.objects.get(pk="xp6").status == RunStatus.RUNNING  # still mid-turn
    assert holder("xp6") == worker.engine_id
    writes = [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
    ]
    assert writes == []

    _parked_on(workers, wait, "xp6", worker)
    assert weft.query("xp6", "seen") == ["one", "two"]
