"""How the admin renders ownership state: lease icons, precise times, links."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.admin.utils import quote
from django.db import models
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from ..conf import Timing
from ..inspection.timeline import compact_json as compact_json  # re-exported for the admin
from ..models import Engine
from ..ownership import LeaseState, db_now

LEASE_STYLE: dict[str, tuple[str, str]] = {
    LeaseState.LIVE: ("#2e7d32", "\u25cf"),  # green dot
    LeaseState.EXPIRED: ("#c62828", "\u2716"),  # red cross
    LeaseState.UNHELD: ("#757575", "\u25cb"),  # grey circle
}


def request_db_now(request: HttpRequest) -> datetime:
    """The database clock, read once per request and reused by every column."""
    now: datetime | None = getattr(request, "_weft_db_now", None)
    if now is None:
        now = db_now()
        # A per-request cache on the request object (HttpRequest declares no such attribute).
        request._weft_db_now = now  # type: ignore[attr-defined]
    return now


def request_cutoff(request: HttpRequest, timing: Timing) -> datetime:
    """The instant before which a lease of ``timing`` is expired, for this request."""
    return timing.cutoff(request_db_now(request))


def render_lease_state(state: str | None) -> str:
    """A coloured icon and label; the CSS class names the state for scripts and tests."""
    if state is None:
        return "-"
    colour, icon = LEASE_STYLE.get(state, ("inherit", "?"))
    label = LeaseState(state).label if state in LeaseState.values else state
    return format_html(
        '<span class="weft-lease weft-lease-{}" style="color: {}; font-weight: bold">{} {}</span>',
        state,
        colour,
        icon,
        label,
    )


def time_html(value: datetime) -> str:
    """``value`` in the user's time zone (Django's current time zone) to the
    second, the exact value on hover: ``<time datetime=... title=...>``."""
    shown = timezone.localtime(value) if timezone.is_aware(value) else value
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        shown.isoformat(sep=" ", timespec="microseconds"),
        shown.strftime("%Y-%m-%d %H:%M:%S"),
    )


def precise(value: datetime | None) -> str:
    """A timestamp to the second (Django's default format stops at minutes), in
    the user's time zone, exact on hover (:func:`time_html`)."""
    if value is None:
        return "-"
    return time_html(value)


def admin_link(model: type[models.Model], pk: Any, text: Any) -> str:
    url = reverse(
        f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[quote(pk)]
    )
    return format_html('<a href="{}">{}</a>', url, text)


def engine_label(engine_id: str | None, hostname: str | None) -> str:
    if engine_id is None:
        return "-"
    return admin_link(Engine, engine_id, f"{engine_id} @ {hostname or '?'}")
