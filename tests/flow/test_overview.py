"""What an operator sees of the queues: the admin overview's table and the gauges."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import weft_django as weft
from weft_django.flow.slots import take_slot
from weft_django.ownership import Acquired
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.metrics import REGISTRY

OVERVIEW = "/admin/weft_django/overview/"


def _busy(make_registry: Callable[..., ClaimRegistry]) -> None:
    holder = make_registry()
    claimed = holder.acquire("busy")
    assert isinstance(claimed, Acquired)
    assert take_slot(
        "default",
        "payments",
        "",
        2,
        run_id="busy",
        engine_id=holder.engine_id,
        epoch=claimed.epoch,
        now=holder.now(),
    )
    for n in range(3):
        weft.start("tests.flow.in_payments", workflow_id=f"w{n}")


def test_the_overview_lists_each_limited_queue(
    admin_client: Any, make_registry: Callable[..., ClaimRegistry]
) -> None:
    _busy(make_registry)
    response = admin_client.get(OVERVIEW)
    assert response.status_code == 200
    rows = {row.name: row for row in response.context["queues"]}
    assert set(rows) == {"payments", "mail"}  # "open" and "default" have no limits
    assert rows["payments"].slots_in_use == 1
    assert rows["payments"].waiting == 3
    assert 'id="weft-queues"' in response.content.decode()


def test_the_gauges_are_read_at_scrape(make_registry: Callable[..., ClaimRegistry]) -> None:
    _busy(make_registry)
    sample = REGISTRY.get_sample_value
    assert sample("weft_queue_slots_in_use", {"queue": "payments"}) == 1
    assert sample("weft_queue_concurrency_limit", {"queue": "payments"}) == 2
    assert sample("weft_queue_waiting", {"queue": "payments"}) == 3
