"""The integration settings plus one flow-control queue, ``flowq``
(docs/flow-control.md): ``WEFT_FLOW_CONCURRENCY`` (default 2) turns at once,
one per concurrency key, and ``WEFT_FLOW_RATE`` (default none) turns a second
(burst: a second's worth, the default)."""

import os

from .settings import *  # noqa: F403
from .settings import WEFT

_rate = os.environ.get("WEFT_FLOW_RATE")
WEFT = {
    **WEFT,
    "QUEUES": {
        "flowq": {
            "concurrency": int(os.environ.get("WEFT_FLOW_CONCURRENCY", "2")),
            "per_key_concurrency": 1,
            **({"rate": f"{_rate}/s"} if _rate else {}),
        }
    },
}
