"""The executor threads' queue: a wake-up goes ahead of new work (issue 11, signal
latency under load), one queued or running turn per run, and a clean close."""

from __future__ import annotations

import threading

from weft_django.pool import TurnPool


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
    pool.close(2)
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()
    assert sorted(ran) == ["a", "b", "c"]
    assert not pool.submit("late")
