"""The single-row lease: one holder at a time across the store (docs/ownership.md).

The one implementation of the single-row leases: the store-wide lease of mode
``lease`` (:mod:`.store`) and the lease of the worker prune pass
(:mod:`weft_django.retention.lease`) are subclasses naming their model and
columns. A row has a token (bumped on every acquisition), a holder (``free``
when nobody holds it) and an expiry; the expiry is judged by
:class:`weft_django.conf.Timing`, on the database clock.

Every transition is a conditional UPDATE checked by rowcount: taking it needs
the (token, holder) read and a free or expired row, re-checked by the UPDATE
itself; renewing and releasing need this engine as holder at the token it
took. A holder that lost the lease can therefore never renew or release
another's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from django.db import IntegrityError, models, transaction
from django.db.models import F, Q

from ...conf import Timing
from ...models import db_for
from ..clock import Clock, db_now, seconds


@dataclass(frozen=True)
class LeaseRow:
    """A single-row lease as read: ``holder`` is the lease's free value when unheld."""

    token: int
    holder: str | None
    expires_at: datetime | None


class SingletonLease:
    """One engine's hold on a single-row lease: take it, renew it, give it up.

    A subclass names the ``model`` (a singleton row, ``id=1``), its
    ``token_field`` and ``holder_field``, and the holder's ``free`` value.
    With ``strict_renewal`` a renewal also needs the lease still live (a holder
    past its own expiry stops even if nobody took over); without it, only a
    takeover ends a holder's lease.
    """

    model: ClassVar[type[models.Model]]
    token_field: ClassVar[str] = "token"
    holder_field: ClassVar[str] = "holder"
    free: ClassVar[str | None] = ""
    strict_renewal: ClassVar[bool] = False

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
        self.token: int | None = None

    def now(self) -> datetime:
        return self._clock() if self._clock is not None else db_now(self.using)

    @property
    def held(self) -> bool:
        return self.token is not None

    def _rows(self) -> models.QuerySet[Any]:
        return self.model._default_manager.using(self.using).filter(id=1)

    def _fields(self, *, token: Any, holder: Any, **more: Any) -> dict[str, Any]:
        return {self.token_field: token, self.holder_field: holder, **more}

    def read(self) -> LeaseRow:
        """The row as it is (created, unheld, on first use)."""
        row = self._rows().values_list(self.token_field, self.holder_field, "expires_at").first()
        if row is None:
            try:
                with transaction.atomic(using=self.using):
                    self.model._default_manager.using(self.using).create(
                        **self._fields(id=1, token=0, holder=self.free)
                    )
            except IntegrityError:
                pass  # another engine created it first
            return self.read()
        return LeaseRow(*row)

    def is_free(self, row: LeaseRow, now: datetime) -> bool:
        """Nobody holds ``row``, or its holder's lease has expired at ``now``."""
        return (
            row.holder == self.free
            or row.expires_at is None
            or self.timing.is_expired(row.expires_at, now)
        )

    def live_holder(self) -> str | None:
        """The holder whose lease is live on the database clock, if any."""
        row = self.read()
        return None if self.is_free(row, self.now()) else row.holder

    def taken_over(self, holder: str) -> None:
        """Called inside the takeover's transaction when ``holder`` was deposed."""

    def try_acquire(self) -> bool:
        """Renew the lease if held, else take it if it is free or expired."""
        if self.token is not None:
            return self.renew()
        row = self.read()
        now = self.now()
        if not self.is_free(row, now):
            return False
        # The UPDATE re-checks what was read: a renewal or a takeover since wins.
        rows = self._rows().filter(**self._fields(token=row.token, holder=row.holder))
        if row.holder != self.free:
            rows = rows.filter(
                Q(expires_at__isnull=True) | Q(expires_at__lt=self.timing.cutoff(now))
            )
        with transaction.atomic(using=self.using):
            won = rows.update(
                **self._fields(
                    token=F(self.token_field) + 1,
                    holder=self.engine_id,
                    acquired_at=now,
                    expires_at=now + seconds(self.timing.ttl),
                )
            )
            if won == 1 and row.holder != self.free and row.holder is not None:
                self.taken_over(row.holder)
        if won == 1:
            self.token = row.token + 1
        return won == 1

    def renew(self) -> bool:
        """Extend the lease; False (and no longer held) when it was lost."""
        if self.token is None:
            return False
        now = self.now()
        rows = self._rows().filter(**self._fields(token=self.token, holder=self.engine_id))
        if self.strict_renewal:
            rows = rows.filter(expires_at__gte=self.timing.cutoff(now))
        ok = rows.update(expires_at=now + seconds(self.timing.ttl)) == 1
        if not ok:
            self.token = None
        return ok

    def release(self) -> bool:
        """Give the lease up (the token stays, so the next holder's is higher)."""
        if self.token is None:
            return False
        token, self.token = self.token, None
        rows = self._rows().filter(**self._fields(token=token, holder=self.engine_id))
        return rows.update(**{self.holder_field: self.free, "expires_at": None}) == 1
