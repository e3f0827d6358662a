"""Threads that race on real database connections (PostgreSQL tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection


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
