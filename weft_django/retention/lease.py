"""The lease of the optional worker prune pass (docs/retention.md): a single row,
so at most one worker prunes at a time across the store.

Every transition is a conditional UPDATE checked by rowcount: taking it needs
the token read (and a free or expired row), renewing and releasing need the
holder and the token this engine took it at. The token is bumped on every
acquisition, so a holder that lost the lease can never renew or release
another's.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F, Q

from ..models import PrunerLease, db_for
from ..ownership import db_now, seconds


class PrunerLeaseManager:
    """One engine's hold on the pruner lease."""

    def __init__(self, engine_id: str, ttl: float, *, using: str | None = None) -> None:
        self.engine_id = engine_id
        self.ttl = ttl
        self.using = db_for(using)
        self.token: int | None = None

    @property
    def held(self) -> bool:
        return self.token is not None

    def _row(self) -> tuple[int, str]:
        rows = PrunerLease.objects.using(self.using).filter(id=1)
        row = rows.values_list("token", "holder").first()
        if row is None:
            try:
                with transaction.atomic(using=self.using):
                    PrunerLease.objects.using(self.using).create(id=1, token=0)
            except IntegrityError:
                pass  # another engine created it first
            row = rows.values_list("token", "holder").get()
        return row

    def try_acquire(self) -> bool:
        """Renew the lease if held, else take it if it is free or expired."""
        if self.token is not None:
            return self.renew()
        token, _holder = self._row()
        now = db_now(self.using)
        won = (
            PrunerLease.objects.using(self.using)
            .filter(Q(holder="") | Q(expires_at__isnull=True) | Q(expires_at__lt=now))
            .filter(id=1, token=token)
            .update(
                holder=self.engine_id,
                token=F("token") + 1,
                acquired_at=now,
                expires_at=now + seconds(self.ttl),
            )
        )
        if won == 1:
            self.token = token + 1
        return won == 1

    def renew(self) -> bool:
        """Extend the lease; False (and no longer held) when it was lost."""
        if self.token is None:
            return False
        now = db_now(self.using)
        ok = (
            PrunerLease.objects.using(self.using)
            .filter(id=1, holder=self.engine_id, token=self.token, expires_at__gte=now)
            .update(expires_at=now + seconds(self.ttl))
            == 1
        )
        if not ok:
            self.token = None
        return ok

    def release(self) -> bool:
        """Give the lease up (the token stays, so the next holder's is higher)."""
        if self.token is None:
            return False
        token, self.token = self.token, None
        return (
            PrunerLease.objects.using(self.using)
            .filter(id=1, holder=self.engine_id, token=token)
            .update(holder="", expires_at=None)
            == 1
        )
