"""Template filters of the admin pages: ``{% load weft_admin %}``."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()

#: The most characters of a value a page shows (a payload may be 64 KiB and more).
JSON_DISPLAY_LIMIT = 2000


@register.filter
def pretty_json(value: Any, limit: int = JSON_DISPLAY_LIMIT) -> str:
    """``value`` as indented JSON (not Python's repr), cut at ``limit`` characters.
    A plain string: the template escapes it."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
