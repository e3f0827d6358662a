"""The first turns of a claimed batch admitted at pickup
(weft_django/flow/admission.py, ``admit_in_order``): one statement on
PostgreSQL, one transaction on MariaDB; as many slots and tokens as there are,
in order, the rate cell moved as one admission after another would."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django.flow.admission import admit_in_order
from weft_django.flow.rate import take_token
from weft_django.flow.slots import take_slots
from weft_django.models import QueueRate, QueueSlot
from weft_django.ownership import Acquired
from weft_django.ownership.claims.registry import ClaimRegistry

from ..conftest import FakeClock

pytestmark = [pytest.mark.postgres, pytest.mark.mysql]


def _holders() -> set[str]:
    return set(QueueSlot.objects.filter(run_id__isnull=False).values_list("run_id", flat=True))


def _claimed_batch(registry: ClaimRegistry, count: int) -> list[tuple[str, int]]:
    runs = []
    for n in range(count):
        claimed = registry.acquire(f"b{n}")
        assert isinstance(claimed, Acquired)
        runs.append((f"b{n}", claimed.epoch))
    return runs


def _made(clock: FakeClock, size: int) -> None:
    """The queue's slot rows and its rate cell exist (their first use is past)."""
    take_slots("default", "payments", [("", size)], run_id="x", engine_id="", epoch=0, now=clock())
    QueueSlot.objects.update(run_id=None)
    QueueRate.objects.get_or_create(queue="payments", key="", defaults={"tat": None})


def test_a_batch_takes_one_released_slot_each_in_order_up_to_the_limit(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    _made(clock, 3)
    QueueSlot.objects.filter(slot_no=1).update(run_id="other", engine_id="e", epoch=1)
    runs = _claimed_batch(registry, 4)
    with CaptureQueriesContext(connection) as queries:
        count = admit_in_order(
            "default", "payments", 3, None, runs, engine_id=registry.engine_id, now=clock()
        )
    assert count == 2  # rows 0 and 2 were released
    if connection.vendor == "postgresql":
        assert len(queries.captured_queries) == 1
    assert _holders() == {"other", "b0", "b1"}
    assert set(
        QueueSlot.objects.filter(run_id__in=["b0", "b1"]).values_list("engine_id", "epoch")
    ) == {(registry.engine_id, runs[0][1])}


def test_a_batch_takes_the_tokens_one_admission_after_another_would(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    _made(clock, 10)
    cell = ("", 2.0, 3)  # 2/s, burst 3
    runs = _claimed_batch(registry, 5)
    count = admit_in_order(
        "default", "payments", 10, cell, runs, engine_id=registry.engine_id, now=clock()
    )
    assert count == 3  # the burst
    batch_tat = QueueRate.objects.get(queue="payments", key="").tat
    QueueRate.objects.update(tat=None)
    for _ in range(3):  # the same turns admitted one by one
        assert take_token("default", "payments", "", 2.0, 3, clock()) is None
    assert take_token("default", "payments", "", 2.0, 3, clock()) is not None
    assert QueueRate.objects.get(queue="payments", key="").tat == batch_tat
    clock.advance(1)  # two more tokens a second later, and the cell moves on from there
    QueueSlot.objects.update(run_id=None)
    assert (
        admit_in_order(
            "default", "payments", 10, cell, runs, engine_id=registry.engine_id, now=clock()
        )
        == 2
    )


def test_a_batch_before_the_first_use_admits_none(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    runs = _claimed_batch(registry, 2)
    args = {"engine_id": registry.engine_id, "now": clock()}
    assert admit_in_order("default", "payments", 2, None, runs, **args) == 0  # no slot rows
    _made(clock, 2)
    QueueRate.objects.all().delete()
    assert admit_in_order("default", "payments", 2, ("", 1.0, 1), runs, **args) == 0  # no cell
    assert _holders() == set()
