"""The executor threads' queue: a wake-up goes ahead of new work (issue 11, signal
latency under load), one queued or running turn per run, and a clean close."""

from __future__ import annotations

import threading

from weft_django.worker.pool import TurnPool


def test_an_urgent_turn_runs_before_everything_queued():
    ran: list[str] = []
    pool = TurnPool(lambda run_id: ran.append(run_id) or False)
    for index in range(5):
        assert pool.submit(f"new-{index}")
    assert pool.submit("woken", urgent=True)
    assert not pool.submit("new-0") and not pool.submit("woken", urgent=True)  # once each
    assert pool.run_pending() == 6
    assert ran == ["woken", "new-0", "new-1", "new-2", "new-3", "new-4"]
    assert pool.idle() and pool.turns_done == 6


def test_threads_serve_the_queue_and_end_on_close():
    done = threading.Event()
    ran: list[str] = []

    def drive(run_id: str) -> bool:
        ran.append(run_id)
        if len(ran) == 3:
            done.set()
        return False

    pool = TurnPool(drive)
    threads = [threading.Thread(target=pool.serve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for run_id in ("a", "b", "c"):
        pool.submit(run_id)
    assert done.wait(5)
    pool.close()
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()
    assert sorted(ran) == ["a", "b", "c"]
    assert not pool.submit("late")


def test_the_wake_thread_serves_a_wake_up_while_every_turn_thread_is_busy():
    """``serve(urgent_only=True)`` (the worker's thread kept for wake-ups) takes a
    wake-up at once although the only turn thread is stuck in a long turn, and
    never takes new work."""
    release = threading.Event()
    started: list[str] = []
    long_started = threading.Event()
    woken_done = threading.Event()

    def drive(run_id: str) -> bool:
        started.append(run_id)
        if run_id == "long":
            long_started.set()
            release.wait(10)
        if run_id == "woken":
            woken_done.set()
        return False

    pool = TurnPool(drive)
    turn = threading.Thread(target=pool.serve)
    wake = threading.Thread(target=pool.serve, kwargs={"urgent_only": True})
    turn.start()
    wake.start()
    pool.submit("long")
    assert long_started.wait(5)
    pool.submit("new")  # waits for the turn thread
    pool.submit("woken", urgent=True)
    assert woken_done.wait(5)
    assert started[:2] == ["long", "woken"] and "new" not in started
    release.set()
    pool.close()
    for thread in (turn, wake):
        thread.join(5)
        assert not thread.is_alive()
    assert sorted(started) == ["long", "new", "woken"]


def test_wake_ups_are_served_in_arrival_order_and_close_drains_without_running():
    ran: list[str] = []
    stopped = threading.Event()
    pool = TurnPool(lambda run_id: ran.append(run_id) or False, stopped=stopped.is_set)
    for run_id in ("w1", "w2", "w3"):
        pool.submit(run_id, urgent=True)
    pool.submit("n1")
    assert pool.run_pending() == 4
    assert ran == ["w1", "w2", "w3", "n1"]
    pool.submit("queued-before-stop")
    stopped.set()
    pool.close()
    thread = threading.Thread(target=pool.serve, kwargs={"urgent_only": True})
    thread.start()
    thread.join(5)
    assert not thread.is_alive()
    other = threading.Thread(target=pool.serve)
    other.start()
    other.join(5)
    assert not other.is_alive()
    assert ran == ["w1", "w2", "w3", "n1"] and pool.idle()
