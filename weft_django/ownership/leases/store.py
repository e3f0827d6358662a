"""The store-wide single-writer lease of ownership mode ``lease`` (docs/ownership.md).

One engine holds it and runs everything; others stand by and take it over
once it has expired on the database clock. Writes are fenced on its epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F

from ...conf import Timing
from ...models import Engine, GlobalLease, db_for
from ..clock import Clock, db_now, seconds


@dataclass(frozen=True)
class GlobalLeaseRow:
    """The global lease row as read."""

    epoch: int
    holder_id: str | None
    expires_at: datetime | None


class GlobalLeaseManager:
    """One engine's view of the global lease: take it, renew it, give it up.

    ``timing`` is the lease timing (``LEASE_TTL``, ``LEASE_RENEW_INTERVAL``).
    """

    def __init__(
        self,
        engine_id: str,
        timing: Timing,
        *,
        using: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.engine_id = engine_id
        self.timing = timing
        self.using = db_for(using)
        self._clock = clock
        self.epoch: int | None = None

    def now(self) -> datetime:
        return self._clock() if self._clock is not None else db_now(self.using)

    @property
    def held(self) -> bool:
        return self.epoch is not None

    def read(self) -> GlobalLeaseRow:
        row = (
            GlobalLease.objects.using(self.using)
            .filter(id=1)
            .values_list("epoch", "holder_id", "expires_at")
            .first()
        )
        if row is None:
            try:
                with transaction.atomic(using=self.using):
                    GlobalLease.objects.using(self.using).create(id=1, epoch=0)
            except IntegrityError:
                pass
            return self.read()
        return GlobalLeaseRow(*row)

    def try_acquire(self) -> bool:
        """Take the lease if it is free or expired (``expires_at + 2 x renew < now``)."""
        state = self.read()
        now = self.now()
        if state.holder_id == self.engine_id and self.epoch == state.epoch:
            return self.renew()
        cutoff = self.timing.cutoff(now)
        if (
            state.holder_id is not None
            and state.expires_at is not None
            and not self.timing.is_expired(state.expires_at, now)
        ):
            return False
        qs = GlobalLease.objects.using(self.using).filter(
            id=1, epoch=state.epoch, holder_id=state.holder_id
        )
        if state.holder_id is not None:
            qs = qs.filter(expires_at__lt=cutoff)
        with transaction.atomic(using=self.using):
            won = qs.update(
                holder_id=self.engine_id,
                epoch=F("epoch") + 1,
                acquired_at=now,
                expires_at=now + seconds(self.timing.ttl),
            )
            if won == 1 and state.holder_id is not None:
                Engine.objects.using(self.using).filter(id=state.holder_id).update(
                    revocations=F("revocations") + 1
                )
        if won == 1:
            self.epoch = state.epoch + 1
            return True
        return False

    def renew(self) -> bool:
        if self.epoch is None:
            return False
        now = self.now()
        ok = (
            GlobalLease.objects.using(self.using)
            .filter(id=1, holder_id=self.engine_id, epoch=self.epoch)
            .update(expires_at=now + seconds(self.timing.ttl))
            == 1
        )
        if not ok:
            self.epoch = None
        return ok

    def release(self) -> bool:
        if self.epoch is None:
            return False
        epoch, self.epoch = self.epoch, None
        return (
            GlobalLease.objects.using(self.using)
            .filter(id=1, holder_id=self.engine_id, epoch=epoch)
            .update(holder_id=None, expires_at=None)
            == 1
        )
