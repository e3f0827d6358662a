"""``NOTIFY`` on commit: one per transaction however many runs it starts or wakes,
none for work rolled back, and every listener woken; a listener (or SQLite's
change watch) also wakes as it begins, so what was announced before is not lost."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from weft_django.conf import get_settings
from weft_django.models import WorkflowRun
from weft_django.runtime import wakeups

from .test_park import waiter

assert waiter  # registers tests.park.waiter

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def postgresql_notify() -> None:
    if not wakeups.notify_enabled():
        pytest.skip("NOTIFY is PostgreSQL's (with WEFT['NOTIFY'] on)")


class Wakes:
    """An ``on_wake`` callback that counts its calls."""

    def __init__(self) -> None:
        self.count = 0
        self.last_at = 0.0  # monotonic time of the last call
        self._changed = threading.Condition()

    def __call__(self) -> None:
        with self._changed:
            self.count += 1
            self.last_at = time.monotonic()
            self._changed.notify_all()

    def reach(self, count: int, timeout: float = 10.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.count >= count, timeout)


@pytest.fixture
def running() -> Iterator[Callable[..., Wakes]]:
    """``running(loop)`` runs ``loop(using, stop, on_wake)`` in a thread; stopped after."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def run(loop: Callable[..., None]) -> Wakes:
        wakes = Wakes()
        thread = threading.Thread(target=loop, args=("default", stop, wakes), daemon=True)
        thread.start()
        threads.append(thread)
        return wakes

    yield run
    stop.set()
    for thread in threads:
        thread.join(5)


def _notifies(queries: CaptureQueriesContext) -> list[list[Any]]:
    return [q["sql"] for q in queries.captured_queries if "pg_notify" in q["sql"]]


@pytest.fixture
def heard(postgresql_notify: None) -> Iterator[Callable[[], list[str]]]:
    """``heard()``: the payloads a ``LISTEN weft_wake`` connection of its own has
    received so far (what a worker's listener would be woken by)."""
    import psycopg

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    listener = psycopg.connect(**params, autocommit=True)
    listener.execute(f"LISTEN {wakeups.CHANNEL}")
    got: list[str] = []

    def collect(wait: float = 0.3) -> list[str]:
        got.extend(note.payload for note in listener.notifies(timeout=wait))
        return got

    yield collect
    listener.close()


def test_a_transaction_of_many_starts_sends_one_notify(heard: Callable[[], list[str]]) -> None:
    """The first start of the transaction carries its NOTIFY in its INSERT; the
    other 49 send none."""
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        for n in range(50):
            weft.start("tests.park.waiter", workflow_id=f"wk-{n}")
    assert len([q for q in queries.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]) == 50
    assert len(_notifies(queries)) == 1
    assert heard() == ["wk-0"]
    assert WorkflowRun.objects.filter(pk__startswith="wk-").count() == 50


def test_each_start_in_autocommit_sends_its_own(heard: Callable[[], list[str]]) -> None:
    with CaptureQueriesContext(connection) as queries:
        for n in range(3):
            weft.start("tests.park.waiter", workflow_id=f"wa-{n}")
    assert len(queries.captured_queries) == 3  # the NOTIFY folded into each INSERT
    assert sorted(heard()) == ["wa-0", "wa-1", "wa-2"]


def test_a_rolled_back_savepoint_takes_its_notify_and_a_later_start_sends_one(
    heard: Callable[[], list[str]],
) -> None:
    with transaction.atomic():
        try:
            with transaction.atomic():
                weft.start("tests.park.waiter", workflow_id="ws-gone")
                raise RuntimeError("roll the savepoint back")
        except RuntimeError:
            pass
        weft.start("tests.park.waiter", workflow_id="ws-kept")
        weft.start("tests.park.waiter", workflow_id="ws-kept-2")
    assert heard() == ["ws-kept"]
    kept = WorkflowRun.objects.filter(pk__startswith="ws-").values_list("pk", flat=True)
    assert sorted(kept) == ["ws-kept", "ws-kept-2"]


def test_a_rolled_back_transaction_sends_none(heard: Callable[[], list[str]]) -> None:
    try:
        with transaction.atomic():
            weft.start("tests.park.waiter", workflow_id="wr-1")
            weft.start("tests.park.waiter", workflow_id="wr-2")
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert heard() == []
    assert not WorkflowRun.objects.filter(pk__startswith="wr-").exists()


def test_a_duplicate_start_sends_none_and_a_later_start_of_the_transaction_does(
    heard: Callable[[], list[str]],
) -> None:
    weft.start("tests.park.waiter", workflow_id="wd-1")
    assert heard() == ["wd-1"]
    with transaction.atomic():
        with pytest.raises(weft.WorkflowAlreadyExistsError):
            weft.start("tests.park.waiter", workflow_id="wd-1")
        weft.start("tests.park.waiter", workflow_id="wd-2")
    assert heard() == ["wd-1", "wd-2"]


@pytest.mark.usefixtures("postgresql_notify")
def test_a_listener_wakes_once_its_listen_is_in_place(running: Callable[..., Wakes]) -> None:
    """Nothing is sent: the wake-up is the listener's own catch-up, for a start
    committed before it listened (a worker's first tick may have missed it)."""
    assert running(wakeups.listen).reach(1)


@pytest.mark.usefixtures("postgresql_notify")
def test_a_listener_is_woken_by_the_one_notify_of_a_burst(
    running: Callable[..., Wakes],
) -> None:
    wakes = running(wakeups.listen)
    assert wakes.reach(1)  # LISTEN is in place
    with transaction.atomic():
        for n in range(20):
            weft.start("tests.park.waiter", workflow_id=f"wl-{n}")
    assert wakes.reach(2)


@pytest.mark.usefixtures("postgresql_notify")
def test_a_listener_whose_connection_dies_reconnects_and_catches_up(
    running: Callable[..., Wakes],
) -> None:
    """The start is committed while the listener is down, so its NOTIFY reaches
    nobody; the wake-up of the reconnected ``LISTEN`` stands for it."""
    wakes = running(wakeups.listen)
    assert wakes.reach(1)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND query = %s",
            [f"LISTEN {wakeups.CHANNEL}"],
        )
        assert cursor.fetchall() == [(True,)]
    weft.start("tests.park.waiter", workflow_id="wl-down")
    assert wakes.reach(2)


def test_the_sqlite_change_watch_wakes_as_it_begins_and_on_a_commit(
    running: Callable[..., Wakes],
) -> None:
    if not wakeups.can_watch_sqlite("default", get_settings()):
        pytest.skip("the change watch is file-based SQLite's (with WEFT['NOTIFY'] on)")
    wakes = running(wakeups.watch_sqlite)
    assert wakes.reach(1)  # before anything was committed
    weft.start("tests.park.waiter", workflow_id="wl-sqlite")
    assert wakes.reach(2)


def test_the_wake_source_is_the_database_s_own_and_none_with_notify_off(
    weft_settings: Callable[..., None],
) -> None:
    stop = threading.Event()
    source = wakeups.wake_source("default", get_settings(), stop, lambda: None)
    if connection.vendor == "postgresql":
        expected: str | None = "weft-listen"
    elif connection.vendor == "sqlite" and not connection.is_in_memory_db():
        expected = "weft-sqlite-watch"
    else:
        expected = None  # MySQL/MariaDB, in-memory SQLite: the fast tick alone
    assert (source[0] if source else None) == expected
    weft_settings(NOTIFY=False)
    assert wakeups.wake_source("default", get_settings(), stop, lambda: None) is None


def _notify_burst(count: int) -> tuple[float, float]:
    """``count`` NOTIFYs, each its own transaction, from a connection other than
    the listener's; returns when the burst began and ended (monotonic)."""
    began = time.monotonic()
    with connection.cursor() as cursor:
        for n in range(count):
            cursor.execute("SELECT pg_notify(%s, %s)", [wakeups.CHANNEL, f"flood-{n}"])
    return began, time.monotonic()


@pytest.mark.usefixtures("postgresql_notify")
def test_a_flood_of_notifies_wakes_a_listener_at_most_once_per_gap(
    running: Callable[..., Wakes],
) -> None:
    wakes = running(wakeups.listen)
    assert wakes.reach(1)
    time.sleep(wakeups.MIN_WAKE_GAP)
    began, ended = _notify_burst(1000)
    # The last notifications of the burst are not dropped: one wake-up for them
    # comes at most a gap after the burst.
    assert wakes.reach(2)
    time.sleep(wakeups.MIN_WAKE_GAP * 4 + 0.25)
    flood_wakes = wakes.count - 1
    assert 1 <= flood_wakes <= (ended - began) / wakeups.MIN_WAKE_GAP + 2, (
        f"{flood_wakes} wake-ups for 1,000 NOTIFYs in {ended - began:.3f}s"
    )
    assert wakes.last_at >= ended  # the burst's tail was delivered


@pytest.mark.usefixtures("postgresql_notify")
def test_a_notify_after_a_quiet_spell_wakes_a_listener_at_once(
    running: Callable[..., Wakes],
) -> None:
    # A gap far longer than a loaded machine's scheduling delays, so that "at
    # once" (well within the gap) cannot be confused with "after the gap".
    gap = 1.0
    wakes = running(functools.partial(wakeups.listen, min_gap=gap))
    assert wakes.reach(1)
    time.sleep(gap + 0.2)  # quiet for longer than the gap
    sent, _ = _notify_burst(1)
    assert wakes.reach(2)
    assert wakes.last_at - sent < gap / 2


@pytest.mark.usefixtures("postgresql_notify")
def test_a_flood_of_notifies_costs_a_worker_at_most_one_look_per_gap(
    start_worker: Callable[..., Any], weft_settings: Callable[..., None]
) -> None:
    """Any role that can connect may ``NOTIFY weft_wake``: 1,000 of them make
    an idle worker tick (look for due and new runs) a few times, not 1,000."""
    weft_settings(TICK_INTERVAL=1.0)  # the wake-ups' looks, not the tick's own
    worker = start_worker().worker
    ticks: list[float] = []
    tick = worker._tick

    def counted(**kwargs: Any) -> int:
        ticks.append(time.monotonic())
        return tick(**kwargs)

    worker._tick = counted
    time.sleep(0.2)  # the listener's own catch-up wake-up is over
    began, ended = _notify_burst(1000)
    time.sleep(0.2)
    looks = len([at for at in ticks if at >= began])
    # One per gap while the flood lasts, one for its tail, one for the tick.
    assert looks <= (time.monotonic() - began) / wakeups.MIN_WAKE_GAP + 2, (
        f"{looks} ticks for 1,000 NOTIFYs in {ended - began:.3f}s"
    )
