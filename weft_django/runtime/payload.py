"""JSON payloads: Django's encoder, a size limit, and a typed error naming the culprit.

Every value that crosses into the database (arguments, step results, signal
and update payloads, results) goes through :func:`encode`. The value handed
back is the JSON round-trip of the input, so a first execution sees exactly
what a replay will see. No pickle anywhere.
"""

from __future__ import annotations

import functools
import json
import re
import traceback
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any

from django.apps import apps
from django.core.serializers.json import DjangoJSONEncoder

from ..conf import get_settings
from ..exceptions import InvalidIdError, PayloadError
from ..stored_json import MAX_PAYLOAD_DEPTH, UndecodableJSON


def dumps(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"), allow_nan=False)


# Text no database column accepts portably: NUL (PostgreSQL's jsonb and text refuse
# it) and UTF-16 surrogates that are not part of a pair (not valid Unicode). In
# ``dumps`` output (ASCII only) they appear as escapes preceded by an even number
# of backslashes (an odd number means the backslash itself was escaped).
_UNSTORABLE = re.compile(
    r"(?<!\\)(?:\\\\)*\\u(?:0000"
    r"|d[89ab][0-9a-f]{2}(?!\\ud[c-f][0-9a-f]{2})"
    r"|(?<!\\ud[89ab][0-9a-f]{2}\\u)d[c-f][0-9a-f]{2})"
)


_CONTAINERS = (list, tuple, dict)
#: A surrogate pair as ``dumps`` escapes it (ASCII output).
_PAIR = re.compile(r"\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}")


def _storable(value: Any, text: str) -> bool:
    """Whether the strings of ``value`` (``text``: its ``dumps``) are text every
    database stores: no NUL, no surrogate code point."""
    return "\\u" not in text or not (_UNSTORABLE.search(text) or _surrogates(value, text))


def _surrogates(value: Any, text: str) -> bool:
    """Whether a string in ``value`` holds surrogate code points that ``text``
    (its ASCII JSON) shows as a pair: a character beyond U+FFFF is escaped as
    that same pair, so only the value itself tells them apart. Two surrogate
    code points are not a character (they would be read back as one)."""
    if not _PAIR.search(text):
        return False
    try:
        json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_depth(value: Any, what: str, *, max_bytes: int, limit: int = MAX_PAYLOAD_DEPTH) -> None:
    """Refuse ``value`` when its lists and dicts nest deeper than ``limit``.

    Iterative, and it stops at the first level over the limit, so no value (a
    deep one, one that contains itself) can make it, or ``json.dumps`` after
    it, recurse out of the interpreter's stack. Every item is at least a byte
    of JSON: more items than ``max_bytes`` is over the size limit, refused
    without walking the rest (a value that shares its parts can be vast).
    """
    if not isinstance(value, _CONTAINERS):
        return
    stack = [value]  # containers still to look into, each at the depth below
    depths = [1]
    items_seen = 0
    while stack:
        container, depth = stack.pop(), depths.pop()
        items = container.values() if isinstance(container, dict) else container
        items_seen += len(items)
        if items_seen > max_bytes:
            raise PayloadError(
                what, f"more than {max_bytes} bytes of JSON is over WEFT['MAX_PAYLOAD_BYTES']"
            )
        inner = [item for item in items if isinstance(item, _CONTAINERS)]
        if not inner:
            continue
        if depth >= limit:
            raise PayloadError(
                what,
                f"nested more than {limit} levels deep (lists and dicts), over the limit "
                f"of {limit} (MAX_PAYLOAD_DEPTH)",
            )
        stack.extend(inner)
        depths.extend([depth + 1] * len(inner))


def encode(
    value: Any, what: str, *, max_bytes: int | None = None, max_depth: int = MAX_PAYLOAD_DEPTH
) -> Any:
    """Validate ``value`` as a JSON payload and return its JSON round-trip.

    Refused with a :class:`PayloadError` naming ``what``: a value that is not
    JSON, nests deeper than :data:`MAX_PAYLOAD_DEPTH`, holds text no database
    stores, or is over ``WEFT['MAX_PAYLOAD_BYTES']``.
    """
    limit = get_settings().max_payload_bytes if max_bytes is None else max_bytes
    check_depth(value, what, max_bytes=limit, limit=max_depth)
    try:
        text = dumps(value)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise PayloadError(what, f"not JSON-serialisable ({exc})") from None
    if not _storable(value, text):
        raise PayloadError(
            what,
            "it holds a NUL character or an unpaired UTF-16 surrogate in a string, "
            "which databases cannot store",
        )
    size = len(text.encode("utf-8"))
    if size > limit:
        raise PayloadError(
            what, f"{size} bytes of JSON is over WEFT['MAX_PAYLOAD_BYTES'] ({limit})"
        )
    return json.loads(text)


def error_info(exc: BaseException, *, with_traceback: bool = True) -> dict[str, Any]:
    """A JSON description of an exception (type name, message, traceback)."""
    info: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)[:4000]}
    if with_traceback:
        info["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[
            -8000:
        ]
    return info


def one_line(exc: BaseException, limit: int = 500) -> str:
    """``Type: message`` of an exception, on one line, for a log line."""
    message = " ".join(str(exc).split())
    if len(message) > limit:
        message = message[:limit] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def encode_call(
    args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any], what: str
) -> tuple[list[Any], dict[str, Any]]:
    """Encode a call's arguments; a value that is not JSON names its argument.

    ``what`` describes the callee (``"workflow 'shop.approve_order'"``); the
    error says ``argument 1 of ...`` or ``keyword argument 'when' of ...``.
    """
    args, kwargs = list(args), dict(kwargs)
    for key in kwargs:
        if not isinstance(key, str):
            raise PayloadError(f"keyword arguments of {what}", f"key {key!r} is not a string")
    culprits = [(f"argument {index}", value) for index, value in enumerate(args)]
    culprits += [(f"keyword argument {key!r}", value) for key, value in kwargs.items()]
    limit = get_settings().max_payload_bytes
    for label, value in culprits:
        check_depth(value, f"{label} of {what}", max_bytes=limit)
    # Each argument within the limit: the list (the dict) that holds them is one more.
    depth = MAX_PAYLOAD_DEPTH + 1
    try:
        return (
            encode(args, f"arguments of {what}", max_depth=depth),
            encode(kwargs, f"keyword arguments of {what}", max_depth=depth),
        )
    except PayloadError:
        for label, value in culprits:
            try:
                dumps(value)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                raise PayloadError(f"{label} of {what}", f"not JSON-serialisable ({exc})") from None
        raise  # every value is JSON on its own: the whole is over the size limit


def encode_call_text(
    args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any], what: str
) -> tuple[str, str]:
    """:func:`encode_call`'s checks, returning the JSON text to store instead of
    the round-trip (a start hands the text to its INSERT and parses nothing).

    The common case costs two ``json.dumps``: values whose text is within the
    size limit, has fewer brackets than the depth limit and no text a database
    refuses are accepted on their text; anything else takes :func:`encode_call`'s
    path, for its precise error (or its verdict)."""
    limit = get_settings().max_payload_bytes
    try:
        if all(type(key) is str for key in kwargs):
            args_text, kwargs_text = dumps(args), dumps(kwargs)  # ASCII: characters = bytes
            if _plain(args, args_text, limit) and _plain(kwargs, kwargs_text, limit):
                return args_text, kwargs_text
    except (TypeError, ValueError, OverflowError, RecursionError):
        pass
    encoded_args, encoded_kwargs = encode_call(args, kwargs, what)
    return dumps(encoded_args), dumps(encoded_kwargs)


def _plain(value: Any, text: str, limit: int) -> bool:
    return (
        len(text) <= limit
        and text.count("[") + text.count("{") <= MAX_PAYLOAD_DEPTH
        and _storable(value, text)
    )


def check_decoded(value: Any, what: str) -> Any:
    """``value`` as read from the database; a ``PayloadError`` naming ``what``
    when it is the placeholder of stored JSON weft does not decode."""
    if isinstance(value, UndecodableJSON):
        raise PayloadError(what, f"the stored JSON cannot be decoded: {value.reason}")
    return value


#: The columns an id or a name is stored in, as ``(model, field)`` of
#: weft_django's models: its limit is the smallest ``max_length`` among them (the
#: models are the one source of truth, read when checking: this module is
#: imported before Django's app registry is ready).
Columns = tuple[tuple[str, str], ...]

RUN_ID: Columns = (("WorkflowRun", "id"), ("WorkflowRun", "parent_id"), ("Claim", "workflow_id"))
#: A child's id is also the name of its ``child_result`` event in the parent.
CHILD_ID: Columns = (*RUN_ID, ("WorkflowEvent", "name"))
EVENT_NAME: Columns = (("WorkflowEvent", "name"),)
SIGNAL_NAME: Columns = (("WorkflowSignal", "name"), ("WorkflowEvent", "name"))
SIGNAL_ID: Columns = (("WorkflowSignal", "signal_id"),)
UPDATE_NAME: Columns = (("UpdateRequest", "name"), ("WorkflowEvent", "name"))
UPDATE_ID: Columns = (("UpdateRequest", "update_id"), ("WorkflowEvent", "name"))

#: Unicode categories of characters that show nothing: separators (Z*: spaces,
#: line and paragraph separators), controls (Cc) and format characters (Cf:
#: zero-width space, joiners, direction marks, ...).
_INVISIBLE = ("Zs", "Zl", "Zp", "Cc", "Cf")


@functools.cache
def id_limit(columns: Columns = RUN_ID) -> int:
    """The longest id or name ``columns`` can all hold, in characters."""
    return min(
        int(getattr(apps.get_model("weft_django", model)._meta.get_field(name), "max_length", 0))
        for model, name in columns
    )


def check_id(value: Any, what: str = "workflow_id", columns: Columns = RUN_ID) -> str:
    """An id or a name, checked against the columns it is stored in.

    A string of 1 to ``id_limit(columns)`` characters (255 for every column
    today: PostgreSQL and MariaDB count characters, and so does this check on
    every database), with no NUL, no unpaired UTF-16 surrogate (it must encode
    as UTF-8), and at least one visible character (not only whitespace,
    control or format characters such as a zero-width space). Otherwise
    :class:`~weft_django.exceptions.InvalidIdError` (a ``ValueError``) naming
    ``what``, before anything is stored.
    """
    limit = id_limit(columns)
    if not isinstance(value, str):
        raise InvalidIdError(what, value, f"must be a string, not {type(value).__name__}", limit)
    if not value:
        raise InvalidIdError(what, value, "must not be empty", limit)
    if len(value) > limit:
        raise InvalidIdError(
            what, value, f"is {len(value)} characters long, over the limit of {limit}", limit
        )
    if "\x00" in value:
        raise InvalidIdError(what, value, "must not hold a NUL character", limit)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        reason = "must not hold an unpaired UTF-16 surrogate (it is not valid Unicode)"
        raise InvalidIdError(what, value, reason, limit) from None
    if all(unicodedata.category(char) in _INVISIBLE for char in value):
        raise InvalidIdError(
            what,
            value,
            "must hold a visible character (it has only whitespace, control or format characters)",
            limit,
        )
    return value


def check_start_at(value: Any, timeout: float | None = None) -> datetime | None:
    """A run's start time: None, or a timezone-aware datetime.

    It must be representable in UTC, and with the workflow's execution
    ``timeout`` (seconds) the deadline ``start_at + timeout`` too, else
    ``ValueError`` naming ``start_at`` (before anything is stored).
    """
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"start_at must be a timezone-aware datetime or None, not {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"start_at must be timezone-aware (e.g. django.utils.timezone.now() + ...), "
            f"got the naive datetime {value.isoformat()}"
        )
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"start_at {value.isoformat()} is out of range: its UTC time is outside the "
            "years 1 to 9999"
        ) from None
    if timeout is not None:
        try:
            (value + timedelta(seconds=timeout)).astimezone(UTC)
        except OverflowError:
            raise ValueError(
                f"start_at {value.isoformat()} is out of range for the workflow's execution "
                f"timeout of {timeout:g} s: the deadline start_at + timeout is past "
                f"{datetime.max.isoformat()}"
            ) from None
    return value
