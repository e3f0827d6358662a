"""Fixtures of the flow-control tests: queues configured, the test workflows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from . import workflows

QUEUES: dict[str, Any] = {
    "payments": {"concurrency": 2, "per_key_concurrency": 1},
    "mail": {"rate": "1/m", "burst": 1},
    "open": {},
}


@pytest.fixture(autouse=True)
def _queues(weft_settings: Callable[..., None]) -> Iterator[None]:
    weft_settings(QUEUES=QUEUES)
    workflows.STATE.update(retry_after=0, calls=0)
    workflows.register()
    yield
    workflows.unregister()
