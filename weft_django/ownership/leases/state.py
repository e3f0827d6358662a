"""Lease state (live / expired / unheld) as operators see it, on the database clock.

One place for the judgment the admin and ``manage.py weft_marker`` show, with
the rule of :class:`weft_django.conf.Timing` (a holder is expired when
``lease_expires_at + 2 x renew interval < db_now``, strictly). The Python
function judges one value; the query expressions judge whole querysets in
SQL, so a changelist stays a constant number of queries.

Claims and engines use the claim timing (an engine's lease is what keeps its
claims alive); the global lease of mode ``lease`` uses the lease timing. The
cutoff is computed once from ``db_now()`` and passed to SQL as a parameter,
so SQLite's second-precision ``CURRENT_TIMESTAMP`` never enters the comparison.
"""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import Case, Q, Value, When
from django.utils.translation import gettext_lazy as _

from ...conf import Timing, get_settings
from ...models import Engine, EngineStatus, db_for
from ..clock import db_now


class LeaseState(models.TextChoices):
    LIVE = "live", _("live")
    EXPIRED = "expired", _("expired")
    UNHELD = "unheld", _("unheld")


def lease_state(expires_at: datetime | None, cutoff_at: datetime) -> LeaseState:
    """Judge one lease: ``None`` means nobody holds it."""
    if expires_at is None:
        return LeaseState.UNHELD
    if expires_at < cutoff_at:
        return LeaseState.EXPIRED
    return LeaseState.LIVE


def lease_state_expression(
    expires_field: str, cutoff_at: datetime, *, held_field: str | None = None
) -> Case:
    """SQL form of :func:`lease_state` for ``.annotate()`` and ``.filter()``.

    ``held_field`` (e.g. ``"holder"``) is null when nobody holds the lease;
    without it a null ``expires_field`` means unheld.
    """
    unheld = Q(**{f"{held_field or expires_field}__isnull": True})
    return Case(
        When(unheld, then=Value(LeaseState.UNHELD.value)),
        When(Q(**{f"{expires_field}__lt": cutoff_at}), then=Value(LeaseState.EXPIRED.value)),
        default=Value(LeaseState.LIVE.value),
        output_field=models.CharField(max_length=8),
    )


def live_engines(
    *,
    using: str | None = None,
    now: datetime | None = None,
    timing: Timing | None = None,
) -> models.QuerySet[Engine]:
    """Engines that may still write: lease live on the database clock, not stopped.

    A stopped engine ended its lease and released its claims when it stopped
    (:func:`weft_django.ownership.leases.engines.mark_stopped`). ``timing`` defaults
    to the claim timing of the current settings.
    """
    using = db_for(using)
    now = now if now is not None else db_now(using)
    timing = timing or get_settings().claim_timing
    return (
        Engine.objects.using(using)
        .exclude(status=EngineStatus.STOPPED)
        .filter(lease_expires_at__gte=timing.cutoff(now))
        .order_by("started_at", "id")
    )
