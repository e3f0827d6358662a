"""The store-wide single-writer lease of ownership mode ``lease`` (DESIGN.md §4.1).

One engine holds it and runs everything; others stand by and take it over
once it has expired on the database clock. Writes are fenced on its epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F

from ..conf import WeftSettings
from ..models import Engine, GlobalLease
from .clock import Clock, db_now, seconds


@dataclass(frozen=True)
class LeaseState:
    epoch: int
    holder_id: str | None
    expires_at: datetime | None


class GlobalLeaseManager:
    def __init__(
        self,
        engine_id: str,
        settings: WeftSettings,
        *,
        using: str = "default",
        clock: Clock | None = None,
    ) -> None:
        self.engine_id = engine_id
        self.settings = settings
        self.using = using
        self._clock = clock
        self.epoch: int | None = None

    def now(self) -> datetime:
        return self._clock() if self._clock is not None else db_now(self.using)

    @property
    def held(self) -> bool:
        return self.epoch is not None

    def read(self) -> LeaseState:
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
        return LeaseState(*row)

    def try_acquire(self) -> bool:
        """Take the lease if it is free or expired (``expires_at + 2 x renew < now``)."""
        state = self.read()
        now = self.now()
        if state.holder_id == self.engine_id and self.epoch == state.epoch:
            return self.renew()
        cutoff = now - seconds(2 * self.settings.lease_renew_interval)
        if (
            state.holder_id is not None
            and state.expires_at is not None
            and (state.expires_at >= cutoff)
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
                expires_at=now + seconds(self.settings.lease_ttl),
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
            .update(expires_at=now + seconds(self.settings.lease_ttl))
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
