"""The lease of the optional worker prune pass (docs/retention.md): a single row,
so at most one worker prunes at a time across the store.

It is the shared single-row lease of the ownership protocol, on the
``PrunerLease`` row: the token is bumped on every acquisition, so a holder
that lost the lease can never renew or release another's.
"""

from __future__ import annotations

from ..conf import Timing
from ..models import PrunerLease
from ..ownership import Clock, SingletonLease


class PrunerLeaseManager(SingletonLease):
    """One engine's hold on the pruner lease, for ``ttl`` seconds at a time.

    The lease has no expiry grace: its holder renews it before every batch
    and a renewal needs the lease still live, so the holder stops at the same
    instant another worker may take it over.
    """

    model = PrunerLease
    token_field = "token"
    holder_field = "holder"
    free = ""
    strict_renewal = True

    def __init__(
        self,
        engine_id: str,
        ttl: float,
        *,
        using: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(engine_id, Timing(ttl, renew_interval=0.0), using=using, clock=clock)

    @property
    def ttl(self) -> float:
        return self.timing.ttl
