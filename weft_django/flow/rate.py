"""Rate limits: at most R turns per second per queue (and per key), with a burst.

Each limiter is one ``QueueRate`` row holding a GCRA cell (the generic cell
rate algorithm): ``tat``, the theoretical arrival time of the next turn. With
interval ``T = 1/R`` and tolerance ``tau = (burst - 1) x T``, a turn at ``now``
is admitted when ``tat - tau <= now``, and moves ``tat`` to
``max(tat, now) + T``; otherwise it may come back at ``tat - tau``, the
moment the window opens. Over any span of ``t`` seconds at most
``burst + R x t`` turns are admitted.

The move is a compare-and-set: read ``tat``, then one conditional UPDATE
``WHERE tat = <as read>``; the row count says whether another engine moved it
first (then read again). Nothing is polled: a refused turn gets the time it
may come back, and the caller parks the run until then.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..models import QueueRate

#: Compare-and-set attempts before a turn gives up for one interval.
ATTEMPTS = 8


def take_token(
    using: str, queue: str, key: str, rate: float, burst: int, now: datetime
) -> datetime | None:
    """Admit one turn of ``(queue, key)``: None when admitted, else the time
    the window opens for it."""
    interval = timedelta(seconds=1.0 / rate)
    tolerance = interval * (burst - 1)
    cells = QueueRate.objects.using(using).filter(queue=queue, key=key)
    for _attempt in range(ATTEMPTS):
        row = cells.values_list("tat", flat=True)
        found = list(row[:1])
        if not found:
            QueueRate.objects.using(using).bulk_create(
                [QueueRate(queue=queue, key=key, tat=None)], ignore_conflicts=True
            )
            continue
        tat = found[0]
        if tat is not None and tat - tolerance > now:
            return tat - tolerance
        base = tat if tat is not None and tat > now else now
        if cells.filter(tat=tat).update(tat=base + interval) == 1:
            return None
    return now + interval  # contended: come back after one interval


def window_opens(using: str, queue: str, key: str, rate: float, burst: int) -> datetime | None:
    """When the next turn of ``(queue, key)`` may come (None: not limited yet)."""
    tat = QueueRate.objects.using(using).filter(queue=queue, key=key).values_list("tat", flat=True)
    found = list(tat[:1])
    if not found or found[0] is None:
        return None
    return found[0] - timedelta(seconds=1.0 / rate) * (burst - 1)
