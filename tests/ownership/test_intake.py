"""New-run intake (weft_django/ownership/claims/intake.py): batches sized to the free
capacity, one INSERT per batch, epoch 1, races between engines, start times."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.concurrency import run_concurrently
from weft_django.conf import get_settings
from weft_django.models import Claim, Engine, RunStatus, WorkflowRun
from weft_django.ownership.claims import intake
from weft_django.ownership.claims.intake import claim_ready, ready_window
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.clock import db_now
from weft_django.ownership.leases.engines import register_engine

NAMES = ["t.wf"]


def pending(count: int, *, prefix: str = "run", name: str = "t.wf", **values: object) -> list[str]:
    base = db_now() - timedelta(hours=1)
    runs = [
        WorkflowRun(
            id=f"{prefix}-{n:05d}",
            workflow_name=name,
            created_at=base + timedelta(milliseconds=n),
            **values,
        )
        for n in range(count)
    ]
    WorkflowRun.objects.bulk_create(runs)
    return [run.id for run in runs]


def registry(engine_id: str) -> ClaimRegistry:
    register_engine(get_settings(), engine_id=engine_id, kind="test")
    return ClaimRegistry(engine_id)


def inserts(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("INSERT")
    ]


def test_a_batch_is_sized_to_capacity_in_queue_order_with_one_insert(
    db: None, weft_settings: Callable[..., None], metric: Callable[..., float]
) -> None:
    ids = pending(50)
    claims = registry("engine-a")
    acquired = metric("weft_workflow_claim_attempts_total", outcome="acquired")
    with CaptureQueriesContext(connection) as queries:
        won = claim_ready(claims, db_now(), NAMES, 7)
    assert won == ids[:7]
    assert len(inserts(queries)) == 1
    assert len(queries.captured_queries) == 3  # now, the window, the INSERT
    assert claims.held == dict.fromkeys(ids[:7], 1)
    rows = Claim.objects.filter(workflow_id__in=ids).order_by("workflow_id")
    assert [(c.workflow_id, c.epoch, c.holder_id) for c in rows] == [
        (run_id, 1, "engine-a") for run_id in ids[:7]
    ]
    assert all(c.claimed_at is not None for c in rows)
    assert metric("weft_workflow_claim_attempts_total", outcome="acquired") == acquired + 7
    # The next call goes on from there; a held run is never taken twice.
    assert claim_ready(claims, db_now(), NAMES, 5) == ids[7:12]


def test_only_registered_types_due_runs_and_unheld_runs(
    db: None, weft_settings: Callable[..., None]
) -> None:
    now = db_now()
    due = pending(2, prefix="due")
    later = pending(2, prefix="later", start_at=now + timedelta(hours=1))
    came = pending(1, prefix="came", start_at=now - timedelta(seconds=1))
    pending(2, prefix="alien", name="t.other")
    pending(2, prefix="parked", status=RunStatus.WAITING)
    claims = registry("engine-a")
    won = claim_ready(claims, now, NAMES, 100)
    assert sorted(won) == sorted(due + came)
    assert not Claim.objects.filter(workflow_id__in=later).exists()
    # Its start time comes: then it is taken.
    assert sorted(claim_ready(claims, now + timedelta(hours=2), NAMES, 100)) == later


def test_a_free_claim_row_is_taken_by_a_conditional_update_at_the_next_epoch(
    db: None, weft_settings: Callable[..., None]
) -> None:
    (run_id,) = pending(1)
    first = registry("engine-a")
    assert claim_ready(first, db_now(), NAMES, 1) == [run_id]
    first.release(run_id)  # e.g. a graceful shutdown before the run started
    second = registry("engine-b")
    assert claim_ready(second, db_now(), NAMES, 1) == [run_id]
    claim = Claim.objects.get(workflow_id=run_id)
    assert (claim.epoch, claim.holder_id) == (2, "engine-b")
    assert second.held == {run_id: 2}


def test_runs_another_engine_holds_are_skipped_and_the_window_goes_further(
    db: None, weft_settings: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = pending(40)
    other = registry("engine-b")
    monkeypatch.setattr(intake, "WINDOW_FACTOR", 1)
    assert claim_ready(other, db_now(), NAMES, 10) == ids[:10]
    mine = registry("engine-a")
    # The first window (10 rows) is all held by engine-b: a longer one follows.
    assert claim_ready(mine, db_now(), NAMES, 10) == ids[10:20]


def test_a_disposing_registry_and_a_cooling_run_take_nothing(
    db: None, weft_settings: Callable[..., None]
) -> None:
    ids = pending(3)
    claims = registry("engine-a")
    claims.cooldown.record_loss(ids[0])
    assert claim_ready(claims, db_now(), NAMES, 10) == ids[1:]
    claims.disposing = True
    pending(2, prefix="more")
    assert claim_ready(claims, db_now(), NAMES, 10) == []
    assert Claim.objects.count() == 2


def test_the_window_reads_only_up_to_its_limit(
    db: None, weft_settings: Callable[..., None]
) -> None:
    pending(30)
    window = ready_window(db_now(), NAMES, 8)
    assert [c.run_id for c in window] == [f"run-{n:05d}" for n in range(8)]
    assert all(c.epoch is None and c.holder_id is None for c in window)
    assert ready_window(db_now(), [], 8) == []


def test_a_lost_insert_race_is_not_counted_as_won(
    db: None, weft_settings: Callable[..., None]
) -> None:
    from weft_django.ownership.claims.first import insert_first_claims

    ids = pending(4)
    registry("engine-a")
    registry("engine-b")
    assert insert_first_claims("default", "engine-b", ids[1:3]) == ids[1:3]
    assert sorted(insert_first_claims("default", "engine-a", ids)) == [ids[0], ids[3]]
    holders = dict(Claim.objects.values_list("workflow_id", "holder_id"))
    assert holders == {
        ids[0]: "engine-a",
        ids[1]: "engine-b",
        ids[2]: "engine-b",
        ids[3]: "engine-a",
    }


@pytest.mark.postgres
@pytest.mark.mysql
@pytest.mark.django_db(transaction=True)
def test_racing_engines_never_claim_a_run_twice(weft_settings: Callable[..., None]) -> None:
    ids = pending(300)
    engines = [registry(f"engine-{n}") for n in range(4)]

    def take(claims: ClaimRegistry) -> Callable[[], list[str]]:
        def run() -> list[str]:
            won: list[str] = []
            while True:
                batch = claim_ready(claims, db_now(), NAMES, 16)
                # Empty while others still win runs ahead of it is fine (the
                # next tick tries again); it stops once every run has a claim.
                if not batch and Claim.objects.count() == len(ids):
                    return won
                won += batch

        return run

    results = run_concurrently(*(take(claims) for claims in engines), timeout=120)
    everything = [run_id for won in results for run_id in won]
    assert sorted(everything) == ids  # every run once, none twice
    for claims, won in zip(engines, results, strict=True):
        assert claims.held == dict.fromkeys(won, 1)
    held = dict(Claim.objects.values_list("workflow_id", "holder_id"))
    for claims, won in zip(engines, results, strict=True):
        assert all(held[run_id] == claims.engine_id for run_id in won)
    assert Claim.objects.filter(epoch=1).count() == 300
    assert Engine.objects.count() == 4
