"""A turn's admission on PostgreSQL in one statement (weft_django/flow/admission.py):
what it settles itself, what it hands to the general path, and that both take
the same slots and tokens; concurrent admissions never exceed a limit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django.flow.gate import admit
from weft_django.flow.rate import take_token
from weft_django.flow.settings import QueueLimits
from weft_django.flow.slots import slots_in_use, take_slots
from weft_django.models import QueueRate, QueueSlot
from weft_django.ownership import Acquired
from weft_django.ownership.claims.registry import ClaimRegistry

from ..conftest import FakeClock

pytestmark = [pytest.mark.postgres]

QUEUE = QueueLimits("payments", concurrency=2, per_key_concurrency=1)
RATED = QueueLimits("mail", rate=1.0, burst=2)


def _admit(
    registry: ClaimRegistry,
    run_id: str,
    clock: FakeClock,
    limits: QueueLimits = QUEUE,
    key: str = "",
) -> tuple[object, int]:
    """Claim ``run_id`` and ask the gate to admit its turn: (its answer, statements)."""
    claimed = registry.acquire(run_id)
    assert isinstance(claimed, Acquired)
    run = {"id": run_id, "concurrency_key": key}
    with CaptureQueriesContext(connection) as queries:
        refused = admit(
            "default", limits, run, engine_id=registry.engine_id, epoch=claimed.epoch, now=clock()
        )
    return refused, len(queries.captured_queries)


def _holders() -> set[str]:
    return set(QueueSlot.objects.filter(run_id__isnull=False).values_list("run_id", flat=True))


def test_a_free_slot_is_one_statement_once_the_rows_exist(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    first, statements = _admit(registry, "r1", clock)
    assert first is None and statements > 1  # the rows' first use: the general path made them
    second, statements = _admit(registry, "r2", clock)
    assert second is None and statements == 1
    assert _holders() == {"r1", "r2"}
    assert slots_in_use("default") == {("payments", ""): 2}


def test_a_queue_full_of_live_holders_is_refused_in_one_statement(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    _admit(registry, "r1", clock)
    _admit(registry, "r2", clock)
    refused, statements = _admit(registry, "r3", clock)
    assert refused is not None and refused[1] == "slot" and statements == 1
    assert _holders() == {"r1", "r2"}


def test_a_slot_of_a_claim_that_moved_on_goes_to_the_general_path(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    _admit(registry, "r1", clock)
    _admit(registry, "r2", clock)
    registry.release("r1")  # r1's claim moved on; its slot row still names it
    refused, statements = _admit(registry, "r3", clock)
    assert refused is None and statements > 1
    assert _holders() == {"r2", "r3"}


def test_all_or_none_a_full_key_takes_no_queue_slot(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    _admit(registry, "r0", clock)  # the queue's rows exist
    assert _admit(registry, "k1", clock, key="customer")[0] is None
    refused, statements = _admit(registry, "k2", clock, key="customer")
    assert refused is not None and refused[1] == "slot" and statements == 1
    assert _holders() == {"r0", "k1"}  # k2 took neither the queue's slot nor the key's


def test_a_turn_that_still_holds_its_slot_takes_it_again_not_a_second(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    _admit(registry, "r0", clock)
    claimed = registry.acquire("r1")
    assert isinstance(claimed, Acquired)
    run = {"id": "r1", "concurrency_key": "c"}
    for _ in range(2):  # as after a release that failed: the same turn's epoch
        with CaptureQueriesContext(connection):
            assert (
                admit(
                    "default",
                    QUEUE,
                    run,
                    engine_id=registry.engine_id,
                    epoch=claimed.epoch,
                    now=clock(),
                )
                is None
            )
    assert QueueSlot.objects.filter(run_id="r1", key="").count() == 1
    assert QueueSlot.objects.filter(run_id="r1", key="c").count() == 1


def test_the_rate_window_opens_when_the_general_path_says(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    answers = [_admit(registry, f"m{n}", clock, RATED) for n in range(3)]
    assert [answer for answer, _statements in answers[:2]] == [None, None]  # the burst of 2
    refused, statements = answers[2]
    assert statements == 1 and refused is not None and refused[1] == "rate"
    tat = QueueRate.objects.get(queue="mail", key="").tat
    # The general path's answer for the same cell (judged, nothing moved: refused).
    assert refused[0] == take_token("default", "mail", "", 1.0, 2, clock())
    assert refused[0] == tat - timedelta(seconds=1)
    clock.advance(1)
    assert _admit(registry, "m3", clock, RATED)[0] is None


@pytest.mark.django_db(transaction=True)
def test_concurrent_admissions_never_exceed_the_limit(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    registry = make_registry()
    size = 3
    limits = QueueLimits("payments", concurrency=size)
    take_slots(  # make the rows (first use), then free them
        "default", "payments", [("", size)], run_id="x", engine_id="", epoch=0, now=clock()
    )
    QueueSlot.objects.update(run_id=None)
    epochs = {}
    for n in range(12):
        claimed = registry.acquire(f"c{n}")
        assert isinstance(claimed, Acquired)
        epochs[f"c{n}"] = claimed.epoch
    admitted: list[str] = []
    barrier = threading.Barrier(12)

    def contend(run_id: str) -> None:
        try:
            barrier.wait()
            run = {"id": run_id, "concurrency_key": ""}
            if (
                admit(
                    "default",
                    limits,
                    run,
                    engine_id=registry.engine_id,
                    epoch=epochs[run_id],
                    now=clock(),
                )
                is None
            ):
                admitted.append(run_id)
        finally:
            connection.close()

    threads = [threading.Thread(target=contend, args=(run_id,)) for run_id in epochs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(admitted) == size
    assert _holders() == set(admitted)
