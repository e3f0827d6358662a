"""Threads that race on real database connections (PostgreSQL and MariaDB/MySQL tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection

# Per server: this connection's id, and whether the connection with that id
# is waiting for a row lock right now.
BACKEND_ID = {"postgresql": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}
WAITS_ON_A_LOCK = {
    "postgresql": (
        "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'"
    ),
    "mysql": (
        "SELECT count(*) FROM information_schema.INNODB_TRX "
        "WHERE trx_mysql_thread_id = %s AND trx_state = 'LOCK WAIT'"
    ),
}


def run_concurrently(*calls: Callable[[], Any], timeout: float = 30.0) -> list[Any]:
    """Run each call in its own thread, released together; each thread closes its
    connection. Returns the results in order; re-raises the first error."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def runner(index: int, call: Callable[[], Any]) -> None:
        try:
            connection.ensure_connection()  # connect before the start line, not after
            barrier.wait(timeout)
            results[index] = call()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=item) for item in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a racing thread hung"
    if errors:
        raise errors[0]
    return results


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``call`` on a thread of its own connection; the box gets its backend id
    (``pid``), then its ``result`` or ``error``."""
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(BACKEND_ID[connection.vendor])
                box["pid"] = cursor.fetchone()[0]
            box["result"] = call()
        except BaseException as exc:
            box["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=runner)
    thread.start()
    return thread, box


def wait_until_blocked_on_a_lock(box: dict[str, Any], timeout: float = 10.0) -> None:
    """Until the connection of the thread that fills ``box`` waits on a row lock.

    Polled every 0.15 s: MariaDB refreshes its INNODB_TRX snapshot only when it
    was last read more than 0.1 s ago (polled faster, it never changes).
    """
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            if "pid" in box:
                cursor.execute(WAITS_ON_A_LOCK[connection.vendor], [box["pid"]])
                if cursor.fetchone()[0]:
                    return
            assert "result" not in box and "error" not in box, f"it never blocked: {box}"
            time.sleep(0.15)
    raise AssertionError("the thread never waited on the lock")
