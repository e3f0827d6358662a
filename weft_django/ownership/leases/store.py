"""The store-wide single-writer lease of ownership mode ``lease`` (docs/ownership.md).

One engine holds it and runs everything; others stand by and take it over
once it has expired on the database clock (the rule of
:class:`weft_django.conf.Timing`, with the lease timing). Writes are fenced
on its epoch, the lease's token. The lease itself is the shared single-row
lease of :mod:`.singleton`.
"""

from __future__ import annotations

from django.db.models import F

from ...models import Engine, GlobalLease
from .singleton import LeaseRow, SingletonLease

#: The global lease row as read (``token`` is its epoch).
GlobalLeaseRow = LeaseRow


class GlobalLeaseManager(SingletonLease):
    """One engine's view of the global lease: take it, renew it, give it up.

    ``timing`` is the lease timing (``LEASE_TTL``, ``LEASE_RENEW_INTERVAL``).
    Only a takeover ends a holder's lease: a holder renews even past its
    expiry while nobody has taken the lease over, keeping its epoch (and so
    its runs' writes) valid. A takeover counts one revocation on the deposed
    engine's row.
    """

    model = GlobalLease
    token_field = "epoch"
    holder_field = "holder_id"
    free = None
    strict_renewal = False

    @property
    def epoch(self) -> int | None:
        """The epoch this engine holds the lease at (None: not held)."""
        return self.token

    def taken_over(self, holder: str) -> None:
        Engine.objects.using(self.using).filter(id=holder).update(revocations=F("revocations") + 1)
