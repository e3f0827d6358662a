"""The lease of the schedule-firing pass (docs/schedules.md): a single row, so
at most one engine of the store fires schedules at a time.

It is the shared single-row lease of the ownership protocol, on the
``ScheduleLease`` row, timed like per-workflow claims (``CLAIM_TTL``,
``CLAIM_RENEW_INTERVAL``): a firer that is SIGKILLed or frozen is replaced
within ``CLAIM_TTL + 3 x CLAIM_RENEW_INTERVAL``. Renewal is strict (it needs
the lease still live), and :meth:`ScheduleLeaseManager.fence` is that renewal
run inside a firing's transaction: its conditional UPDATE both proves the
token is still this engine's and locks the row until the firing commits, so a
takeover waits for the firing, and a deposed (zombie) firer's late firing is
refused and rolled back.
"""

from __future__ import annotations

from ..models import ScheduleLease
from ..ownership import SingletonLease


class ScheduleLeaseManager(SingletonLease):
    """One engine's hold on the schedule lease."""

    model = ScheduleLease
    token_field = "token"
    holder_field = "holder"
    free = ""
    strict_renewal = True

    def fence(self) -> bool:
        """Inside the firing's transaction: renew at this engine's token, or
        False (and no longer held) when the lease was lost or has lapsed."""
        return self.renew()
