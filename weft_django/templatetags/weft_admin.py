"""Template filters of the admin pages: ``{% load weft_admin %}``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django import template

from ..admin.charts import human_duration
from ..admin.display import time_html

register = template.Library()

#: The most characters of a value a page shows (a payload may be 64 KiB and more).
JSON_DISPLAY_LIMIT = 2000


@register.filter
def pretty_json(value: Any, limit: int = JSON_DISPLAY_LIMIT) -> str:
    """``value`` as indented JSON (not Python's repr), cut at ``limit`` characters.
    A plain string: the template escapes it."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@register.filter
def duration(value: float | timedelta | None) -> str:
    """A duration for a person: ``1.2 s``, ``3 min 4 s``, ``4 ms`` (every duration
    the admin shows goes through this filter)."""
    try:
        return human_duration(value)
    except (TypeError, ValueError):
        return ""


@register.filter(is_safe=True)
def when(value: datetime | None) -> str:
    """A timestamp in the user's time zone (Django's current time zone) to the
    second, the exact value on hover: ``<time datetime=... title=...>``."""
    if not isinstance(value, datetime):
        return ""
    return time_html(value)
