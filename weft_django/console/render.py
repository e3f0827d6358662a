"""How ``manage.py weft`` prints: an aligned table (or ``key: value`` lines for
one record) by default, and one JSON document with ``--json``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

#: A table cell's widest text; longer values are cut with an ellipsis.
CELL_WIDTH = 60


def as_json(value: Any) -> str:
    """``value`` as indented JSON (datetimes in ISO 8601)."""
    return json.dumps(value, cls=DjangoJSONEncoder, indent=2, sort_keys=False)


def cell(value: Any, width: int = CELL_WIDTH) -> str:
    """One value as table text: ``-`` for None, datetimes to the second,
    seconds to a tenth, JSON compact; at most ``width`` characters."""
    if value is None or value == "":
        text = "-"
    elif isinstance(value, datetime):
        text = value.isoformat(timespec="seconds")
    elif isinstance(value, float):
        text = f"{value:.1f}"
    elif isinstance(value, (dict, list, tuple, bool)):
        text = json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"))
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """``rows`` as an aligned table with a header of ``columns`` (upper case)."""
    cells = [[cell(row.get(column)) for column in columns] for row in rows]
    header = [column.upper() for column in columns]
    widths = [max(len(text) for text in column) for column in zip(header, *cells, strict=False)]
    lines = [header, *cells]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def record(values: dict[str, Any]) -> str:
    """One record as aligned ``key: value`` lines (nested lists of rows as tables)."""
    width = max((len(key) for key in values), default=0)
    lines = []
    for key, value in values.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{key}:")
            lines.extend("  " + line for line in table(value, list(value[0])).splitlines())
        else:
            lines.append(f"{key.ljust(width)}  {cell(value, width=200)}")
    return "\n".join(lines)
