"""``NOTIFY`` on commit: one per transaction however many runs it starts or wakes,
none for work rolled back, and every listener woken."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from weft_django.models import WorkflowRun
from weft_django.runtime import wakeups

from .test_park import waiter

assert waiter  # registers tests.park.waiter

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql_with_notify() -> None:
    if not wakeups.notify_enabled():
        pytest.skip("NOTIFY is PostgreSQL's (with WEFT['NOTIFY'] on)")


def _notifies(queries: CaptureQueriesContext) -> list[list[Any]]:
    return [q["sql"] for q in queries.captured_queries if "pg_notify" in q["sql"]]


def test_a_transaction_of_many_starts_sends_one_notify() -> None:
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        for n in range(50):
            weft.start("tests.park.waiter", workflow_id=f"wk-{n}")
    assert len(_notifies(queries)) == 1
    assert "wk-0" in _notifies(queries)[0]
    assert WorkflowRun.objects.filter(pk__startswith="wk-").count() == 50


def test_each_start_in_autocommit_sends_its_own() -> None:
    with CaptureQueriesContext(connection) as queries:
        for n in range(3):
            weft.start("tests.park.waiter", workflow_id=f"wa-{n}")
    assert len(_notifies(queries)) == 3


def test_a_rolled_back_savepoint_takes_its_notify_and_a_later_start_sends_one() -> None:
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        try:
            with transaction.atomic():
                weft.start("tests.park.waiter", workflow_id="ws-gone")
                raise RuntimeError("roll the savepoint back")
        except RuntimeError:
            pass
        weft.start("tests.park.waiter", workflow_id="ws-kept")
    sent = _notifies(queries)
    assert len(sent) == 1 and "ws-kept" in sent[0]
    assert list(WorkflowRun.objects.filter(pk__startswith="ws-").values_list("pk", flat=True)) == [
        "ws-kept"
    ]


def test_a_rolled_back_transaction_sends_none() -> None:
    with CaptureQueriesContext(connection) as queries:
        try:
            with transaction.atomic():
                weft.start("tests.park.waiter", workflow_id="wr-1")
                weft.start("tests.park.waiter", workflow_id="wr-2")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
    assert _notifies(queries) == []


def test_a_listener_is_woken_by_the_one_notify_of_a_burst() -> None:
    woken = threading.Event()
    stop = threading.Event()
    listener = threading.Thread(
        target=wakeups.listen, args=("default", stop, woken.set), daemon=True
    )
    listener.start()
    try:
        # LISTEN is issued once the thread has connected: keep starting until seen.
        for attempt in range(40):
            with transaction.atomic():
                for n in range(20):
                    weft.start("tests.park.waiter", workflow_id=f"wl-{attempt}-{n}")
            if woken.wait(0.25):
                break
        assert woken.is_set()
    finally:
        stop.set()
        listener.join(5)
