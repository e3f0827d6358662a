"""Wake-ups across processes: PostgreSQL ``NOTIFY`` on commit (DESIGN.md §7).

Every write that makes a run runnable (start, signal, update, child
completion) also leaves a durable wake hint on the run row; ``NOTIFY`` only
makes the owner notice at once instead of on its next fast tick.
"""

from __future__ import annotations

from django.db import connections, transaction

from .conf import get_settings

CHANNEL = "weft_wake"


def notify_enabled(using: str = "default") -> bool:
    return connections[using].vendor == "postgresql" and get_settings().notify


def notify(run_id: str, *, using: str = "default") -> None:
    """Send ``NOTIFY weft_wake, run_id`` once the current transaction commits."""
    if not notify_enabled(using):
        return

    def send() -> None:
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, run_id[:7000]])

    transaction.on_commit(send, using=using, robust=True)
