"""Faults injected into a worker process of the integration tests (``IT_FAULT``).

Test-only monkeypatches, installed by the itapp's ``ready()`` when the
environment names one; a worker without ``IT_FAULT`` is untouched.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import OperationalError

from weft_django.ownership.modes import WorkflowLeaseOwnership
from weft_django.ownership.passes.outcomes import PassResult
from weft_django.worker import Worker


def renew_fails() -> None:
    """Every renewal fails: the engine's lease can never be extended."""

    def renew(self: WorkflowLeaseOwnership) -> PassResult:
        raise OperationalError("IT_FAULT: the engine row cannot be renewed")

    WorkflowLeaseOwnership.renew = renew  # type: ignore[method-assign]


def renewal_thread_dies_once() -> None:
    """The renewal thread dies once, outside any pass's own error handling."""
    real = Worker._publish
    died = threading.Event()

    def publish(self: Worker, result: PassResult) -> Any:
        if result.name == "renew" and not died.is_set():
            died.set()
            raise RuntimeError("IT_FAULT: the renewal thread dies")
        return real(self, result)

    Worker._publish = publish  # type: ignore[method-assign]


FAULTS = {"renew-fails": renew_fails, "renewal-thread-dies-once": renewal_thread_dies_once}


def install(names: str) -> None:
    for name in filter(None, names.split(",")):
        FAULTS[name]()
