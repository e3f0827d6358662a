"""``weft_worker --queue NAME``: which runs a worker claims."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.management import CommandError

from weft_django.management.commands.weft_worker import select_queues
from weft_django.runtime import registry


@pytest.fixture(autouse=True)
def _every_queue_again() -> Iterator[None]:
    yield
    registry.serve_queues(None)


def test_the_queues_served_go_into_the_claim_filter() -> None:
    assert registry.served().queues is None  # no flag: every queue
    select_queues(["payments", "default"])
    assert registry.served().queues == frozenset({"payments", "default"})


def test_an_unknown_queue_refuses_to_start() -> None:
    with pytest.raises(CommandError, match="--queue nope: not a queue"):
        select_queues(["nope", "payments"])
    assert registry.served().queues is None
