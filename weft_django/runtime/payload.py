"""JSON payloads: Django's encoder, a size limit, and a typed error naming the culprit.

Every value that crosses into the database (arguments, step results, signal
and update payloads, results) goes through :func:`encode`. The value handed
back is the JSON round-trip of the input, so a first execution sees exactly
what a replay will see. No pickle anywhere.
"""

from __future__ import annotations

import json
import traceback
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from ..conf import get_settings
from ..exceptions import PayloadError


def dumps(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"), allow_nan=False)


def encode(value: Any, what: str, *, max_bytes: int | None = None) -> Any:
    """Validate ``value`` as a JSON payload and return its JSON round-trip."""
    try:
        text = dumps(value)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise PayloadError(what, f"not JSON-serialisable ({exc})") from None
    limit = get_settings().max_payload_bytes if max_bytes is None else max_bytes
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
    try:
        return encode(args, f"arguments of {what}"), encode(kwargs, f"keyword arguments of {what}")
    except PayloadError:
        culprits = [(f"argument {index}", value) for index, value in enumerate(args)]
        culprits += [(f"keyword argument {key!r}", value) for key, value in kwargs.items()]
        for label, value in culprits:
            try:
                dumps(value)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                raise PayloadError(f"{label} of {what}", f"not JSON-serialisable ({exc})") from None
        raise  # every value is JSON on its own: the whole is over the size limit


MAX_ID_LENGTH = 255


def check_id(value: Any, what: str = "workflow_id") -> str:
    """An id or a name stored in a 255-character column: a non-empty string."""
    if not isinstance(value, str) or not value or len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{what} must be a non-empty string of at most {MAX_ID_LENGTH} characters")
    return value
