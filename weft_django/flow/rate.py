"""Rate limits: at most R turns per second per queue (and per key), with a burst.

Each limiter is one ``QueueRate`` row holding a GCRA cell (the generic cell
rate algorithm): ``tat``, the theoretical arrival time of the next turn. With
interval ``T = 1/R`` and tolerance ``tau = (burst - 1) x T``, a turn at ``now``
is admitted when ``tat - tau <= now``, and moves ``tat`` to
``max(tat, now) + T``; otherwise it may come back at ``tat - tau``, the
moment the window opens. Over any span of ``t`` seconds at most
``burst + R x t`` turns are admitted.

The move is one conditional UPDATE (:func:`take_token`); its row count says
whether the turn was admitted. Nothing is polled: a refused turn gets the time it
may come back, and the caller parks the run until then.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Greatest

from ..models import QueueRate


def take_token(
    using: str, queue: str, key: str, rate: float, burst: int, now: datetime
) -> datetime | None:
    """Admit one turn of ``(queue, key)``: None when admitted, else the time
    the window opens for it.

    One conditional UPDATE does the judgment and the move together:
    ``SET tat = max(tat, now) + T WHERE tat IS NULL OR tat <= now + tau``. A
    concurrent UPDATE of the cell makes this one wait for it, then re-judge
    against the cell as it left it (PostgreSQL and InnoDB re-read the row;
    SQLite has one writer), so no compare-and-set loop is needed. Refused
    (or on the cell's first use), one read follows."""
    interval = timedelta(seconds=1.0 / rate)
    tolerance = interval * (burst - 1)
    cells = QueueRate.objects.using(using).filter(queue=queue, key=key)
    moved = cells.filter(Q(tat__isnull=True) | Q(tat__lte=now + tolerance)).update(
        tat=Greatest(Coalesce(F("tat"), Value(now)), Value(now)) + Value(interval)
    )
    if moved == 1:
        return None
    found = list(cells.values_list("tat", flat=True)[:1])
    if not found:  # the cell's first use: make it, then try once more
        QueueRate.objects.using(using).bulk_create(
            [QueueRate(queue=queue, key=key, tat=None)], ignore_conflicts=True
        )
        return take_token(using, queue, key, rate, burst, now)
    tat = found[0]
    return tat - tolerance if tat is not None else now + interval


def window_opens(using: str, queue: str, key: str, rate: float, burst: int) -> datetime | None:
    """When the next turn of ``(queue, key)`` may come (None: not limited yet)."""
    tat = QueueRate.objects.using(using).filter(queue=queue, key=key).values_list("tat", flat=True)
    found = list(tat[:1])
    if not found or found[0] is None:
        return None
    return found[0] - timedelta(seconds=1.0 / rate) * (burst - 1)


def tokens_at(tat: datetime | None, now: datetime, rate: float, burst: int) -> int:
    """How many turns the cell admits at ``now``, one after another: ``burst``
    when unused, else ``1 + floor((now + tau - max(tat, now)) / T)`` while
    ``tat <= now + tau``, else none (a millionth of a token absorbs the float
    error of ``tau / T``). The batch statement of :mod:`.admission` computes
    the same in SQL."""
    if tat is None:
        return burst
    interval = 1.0 / rate
    tolerance = interval * (burst - 1)
    if tat > now + timedelta(seconds=tolerance):
        return 0
    ahead = (now + timedelta(seconds=tolerance) - max(tat, now)).total_seconds()
    return 1 + math.floor(ahead / interval + 0.000001)


def moved_tat(tat: datetime | None, now: datetime, rate: float, count: int) -> datetime:
    """The cell after admitting ``count`` turns at ``now``: ``max(tat, now) + count x T``."""
    start = now if tat is None or tat < now else tat
    return start + timedelta(seconds=count / rate)
