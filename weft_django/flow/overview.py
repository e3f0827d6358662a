"""What the admin's overview and the gauges show of each queue: its limits,
the slots in use, and the runs waiting for a slot or for the rate window."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from ..models import QueueRate, RunStatus, WorkflowRun, db_for
from .settings import QueueLimits, queues
from .slots import slots_in_use

#: The waiting runs counted per queue at most (shown as "10,000+").
WAITING_CAP = 10_000


@dataclass(frozen=True)
class QueueRow:
    name: str
    limits: QueueLimits
    slots_in_use: int = 0
    keys_busy: int = 0
    waiting: int = 0
    rate_opens_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def waiting_capped(self) -> bool:
        return self.waiting > WAITING_CAP


def queue_overview(*, using: str | None = None) -> list[QueueRow]:
    """One row per configured queue (``"default"`` first), limited ones only
    read from the database (the slot table, and pending runs held back)."""
    using = db_for(using)
    configured = queues()
    limited = [name for name, limits in configured.items() if limits.limited]
    in_use = slots_in_use(using) if limited else {}
    # Runs waiting for flow control: deferred runs have a start time or timer
    # ahead; counted among the active runs of the limited queues only.
    waiting: dict[str, int] = {}
    rate_at: dict[str, datetime | None] = {}
    if limited:
        pending = WorkflowRun.objects.using(using).filter(status=RunStatus.PENDING)
        for name in limited:  # each a bounded count (a LIMIT in a derived table)
            waiting[name] = pending.filter(queue=name).order_by()[: WAITING_CAP + 1].count()
        rate_at = dict(
            QueueRate.objects.using(using)
            .filter(Q(key="") & Q(queue__in=limited))
            .values_list("queue", "tat")
        )
    rows = []
    for name, limits in configured.items():
        rows.append(
            QueueRow(
                name,
                limits,
                slots_in_use=in_use.get((name, ""), 0),
                keys_busy=sum(1 for (q, k), n in in_use.items() if q == name and k and n),
                waiting=waiting.get(name, 0),
                rate_opens_at=_opens(limits, rate_at.get(name)),
            )
        )
    return rows


def _opens(limits: QueueLimits, tat: datetime | None) -> datetime | None:
    """When the queue's rate window lets the next turn in (its cell's ``tat``
    less the burst's tolerance), None when not limited or never used."""
    if tat is None or limits.rate is None:
        return None
    return tat - timedelta(seconds=(limits.burst - 1) / limits.rate)
