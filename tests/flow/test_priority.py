"""The intake under flow control: higher priority first, due time bounding
starvation, a worker's --queue filter, no claim of a run whose queue is full."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from weft_django.flow.slots import take_slot
from weft_django.models import WorkflowRun
from weft_django.ownership import Acquired, Served
from weft_django.ownership.claims.intake import claim_ready
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.clock import db_now

from ..ownership.test_intake import registry

SERVED = Served([("t.wf", 1)])


def pending(
    count: int, *, prefix: str, age: timedelta = timedelta(hours=1), **values: object
) -> list[str]:
    """``count`` pending runs of ``t.wf`` created ``age`` ago (1 ms apart)."""
    base = db_now() - age
    runs = [
        WorkflowRun(
            id=f"{prefix}-{n:05d}",
            workflow_name="t.wf",
            created_at=base + timedelta(milliseconds=n),
            **values,
        )
        for n in range(count)
    ]
    WorkflowRun.objects.bulk_create(runs)
    return [run.id for run in runs]


def test_a_high_priority_run_goes_ahead_of_a_backlog(
    db: None, weft_settings: Callable[..., None]
) -> None:
    # Due for 10 s (10 points), and beyond the first window of capacity 2.
    pending(300, prefix="low", age=timedelta(seconds=10))
    pending(1, prefix="high", priority=50, age=timedelta(0))
    pending(1, prefix="mid", priority=20, age=timedelta(0))
    won = claim_ready(registry("engine-a"), db_now(), SERVED, 2)
    assert won == ["high-00000", "mid-00000"]


def test_a_negative_priority_waits_behind_priority_zero_within_the_window(
    db: None, weft_settings: Callable[..., None]
) -> None:
    pending(1, prefix="neg", priority=-50, age=timedelta(seconds=5))
    pending(2, prefix="zero", age=timedelta(0))
    assert claim_ready(registry("engine-a"), db_now(), SERVED, 2) == ["zero-00000", "zero-00001"]


def test_a_run_due_long_enough_goes_first_whatever_its_priority(
    db: None, weft_settings: Callable[..., None]
) -> None:
    # -100 + 300 s due = 200 points: ahead of a fresh 100.
    pending(1, prefix="old", priority=-100, age=timedelta(minutes=5))
    pending(1, prefix="high", priority=100, age=timedelta(0))
    assert claim_ready(registry("engine-a"), db_now(), SERVED, 1) == ["old-00000"]


def test_a_worker_serving_some_queues_claims_only_their_runs(
    db: None, weft_settings: Callable[..., None]
) -> None:
    pending(3, prefix="def", age=timedelta(0))
    pending(2, prefix="pay", queue="payments", age=timedelta(0))
    only = Served([("t.wf", 1)], queues={"payments"})
    assert claim_ready(registry("engine-a"), db_now(), only, 10) == ["pay-00000", "pay-00001"]


def test_the_intake_leaves_runs_of_a_full_queue_unclaimed(
    db: None, make_registry: Callable[..., ClaimRegistry]
) -> None:
    pending(4, prefix="pay", queue="payments", concurrency_key="k1")
    pending(2, prefix="other", queue="payments", concurrency_key="k2")
    holder = make_registry()
    claimed = holder.acquire("elsewhere")
    assert isinstance(claimed, Acquired)
    take_slot(
        "default",
        "payments",
        "",
        2,
        run_id="elsewhere",
        engine_id=holder.engine_id,
        epoch=claimed.epoch,
        now=holder.now(),
    )
    # One global slot left (of 2), one per key: one run of k1 at most.
    won = claim_ready(registry("engine-b"), db_now(), SERVED, 10)
    assert won == ["pay-00000"]
