"""Flow control's shared state (docs/flow-control.md): the concurrency slots
of each queue and the rate limiters' cells.

Both are written only through :mod:`weft_django.flow` with conditional
UPDATEs checked by rowcount.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class QueueSlot(models.Model):
    """One numbered concurrency slot of a queue (``key`` ``""``: the queue's
    global limit) or of one concurrency key of a queue.

    The rows are pre-numbered (``slot_no`` 0..N-1) and unique, so no more than N
    holders can ever exist. A slot is held by the run whose turn took it, at the
    claim epoch of that turn: it is *free* when ``run_id`` is empty or when the
    claim no longer names ``(run_id, engine_id, epoch)`` (a takeover, a
    revocation or a release moved it on), see :mod:`weft_django.flow.slots`.
    """

    queue = models.CharField(max_length=64)
    key = models.CharField(max_length=128, blank=True, default="")
    slot_no = models.PositiveIntegerField()
    run_id = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    engine_id = models.CharField(max_length=64, blank=True, default="")
    epoch = models.BigIntegerField(default=0)
    taken_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("queue slot")
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "key", "slot_no"], name="weft_queue_slot_uniq"
            ),
        ]
        # A turn's release finds its slots by run.
        indexes = [models.Index(fields=["run_id"], name="weft_queue_slot_run_idx")]

    def __str__(self) -> str:
        return f"{self.queue}[{self.key}]#{self.slot_no}"


class QueueRate(models.Model):
    """A queue's (or one key's) rate limiter: a GCRA cell whose theoretical
    arrival time ``tat`` moves forward by one interval per turn admitted."""

    queue = models.CharField(max_length=64)
    key = models.CharField(max_length=128, blank=True, default="")
    tat = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("queue rate limiter")
        constraints = [
            models.UniqueConstraint(fields=["queue", "key"], name="weft_queue_rate_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.queue}[{self.key}]"
