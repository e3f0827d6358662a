"""Stored JSON: the nesting limits, and reading a column whatever it holds.

Every weft table's JSON columns are :class:`StoredJSONField`: a Django
``JSONField`` that measures how deeply the stored text nests *before* parsing
it, and hands back an :class:`UndecodableJSON` placeholder instead of a value
too deep to handle safely (a row written before the limit existed, or by hand)
or one Python cannot read. Readers never raise ``RecursionError``: the admin
shows the placeholder, the worker fails the run with a ``PayloadError``.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from django.db import models

#: How deeply a value handed to weft may nest (``[1]`` is 1 level, ``[[1]]`` 2,
#: ``{"a": [1]}`` 2, a scalar 0): every argument, step result, signal and update
#: payload, update response and workflow result. MariaDB's ``JSON_VALID`` refuses
#: documents nested deeper than 31 arrays/objects (its limit of 32 counts the
#: innermost value), and weft stores some values one level down in its own JSON
#: (the argument list, a child's outcome, a delivered update): 30 leaves room for
#: that, the same limit on every database.
MAX_PAYLOAD_DEPTH = 30

#: The deepest stored JSON weft decodes; deeper text (written before
#: :data:`MAX_PAYLOAD_DEPTH` existed, or by hand) reads as :class:`UndecodableJSON`.
MAX_READ_DEPTH = 100

# A JSON string (escapes included) and a run of anything that is not a bracket.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def json_text_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON ``text`` nest, without parsing
    it (strings and their escapes skipped), so text of any depth is safe to measure.

    Text that is not JSON gets a number too (brackets counted as they come)."""
    if "[" not in text and "{" not in text:
        return 0
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii")
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets)), default=0))


class UndecodableJSON:
    """Stands for a stored JSON value weft does not decode (``reason`` says why).

    ``str()`` is the placeholder the admin shows; it is not JSON-serialisable,
    so it is never written back."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __str__(self) -> str:
        return f"(payload cannot be shown: {self.reason})"

    def __repr__(self) -> str:
        return f"<UndecodableJSON: {self.reason}>"


def load_stored_json(text: str) -> Any:
    """Decode stored JSON ``text``; an :class:`UndecodableJSON` when it nests
    deeper than :data:`MAX_READ_DEPTH` or Python cannot read it (a number of
    more digits than ``sys.get_int_max_str_digits()``)."""
    # A text with few brackets cannot nest deeply: the common case skips the scan.
    if text.count("[") + text.count("{") > MAX_READ_DEPTH:
        depth = json_text_depth(text)
        if depth > MAX_READ_DEPTH:
            return UndecodableJSON(f"nested too deep, {depth} levels")
    try:
        return json.loads(text)
    except RecursionError:
        return UndecodableJSON("nested too deep")
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        return UndecodableJSON(f"not readable ({exc})")


class StoredJSONField(models.JSONField):
    """A ``JSONField`` whose reads never raise on what the column holds (see the
    module docstring). Migrations see a plain ``JSONField``: same column."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if isinstance(value, str) and self.decoder is None:
            try:
                return load_stored_json(value)
            except json.JSONDecodeError:
                return value  # as JSONField does
        return super().from_db_value(value, expression, connection)

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
