"""Retention (weft_django.retention.pruner): what a prune deletes, keeps and skips."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

import weft_django as weft
from tests.factories import (
    ClaimFactory,
    EngineFactory,
    GlobalLeaseFactory,
    UpdateRequestFactory,
    WorkflowEventFactory,
    WorkflowRunFactory,
    WorkflowSignalFactory,
)
from weft_django.exceptions import WeftConfigurationError
from weft_django.models import (
    Claim,
    Engine,
    RunStatus,
    UpdateRequest,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from weft_django.ownership.clock import db_now
from weft_django.retention.pruner import Batch, Pruner, prune
from weft_django.retention.settings import policy
from weft_django.testing import WorkflowDriver

pytestmark = pytest.mark.django_db(transaction=True)

DAY = timedelta(days=1)


def finished(status: str, age: timedelta, run_id: str, **kwargs: Any) -> WorkflowRun:
    """A run that finished ``age`` ago, with two events, a signal and an update row."""
    run = WorkflowRunFactory(
        id=run_id, status=status, finished_at=db_now() - age, started_at=db_now() - age, **kwargs
    )
    WorkflowEventFactory(run=run, seq=1)
    WorkflowEventFactory(run=run, seq=2)
    WorkflowSignalFactory(run=run, consumed=True)
    UpdateRequestFactory(run=run, applied=True)
    return run


def remaining() -> set[str]:
    return set(WorkflowRun.objects.values_list("id", flat=True))


def test_each_status_keeps_its_own_retention() -> None:
    retention = policy({"COMPLETED": DAY, "FAILED": 3 * DAY, "CANCELLED": None, "TIMED_OUT": 0})
    finished("completed", 2 * DAY, "c-old")
    finished("completed", timedelta(hours=12), "c-new")
    finished("failed", 2 * DAY, "f-young")
    finished("failed", 4 * DAY, "f-old")
    finished("cancelled", 400 * DAY, "x-forever")
    finished("timed_out", timedelta(seconds=1), "t-any")
    for status in ("pending", "running", "waiting", "suspended"):
        WorkflowRunFactory(id=f"live-{status}", status=status, created_at=db_now() - 500 * DAY)
    summary = prune(retention=retention)
    assert remaining() == {"c-new", "f-young", "x-forever"} | {
        f"live-{s}" for s in ("pending", "running", "waiting", "suspended")
    }
    assert summary.by_status == {"completed": 1, "failed": 1, "timed_out": 1}
    assert summary.deleted == {"runs": 3, "events": 6, "signals": 3, "updates": 3, "engines": 0}
    assert not WorkflowEvent.objects.filter(run_id__in=["c-old", "f-old", "t-any"]).exists()
    assert WorkflowEvent.objects.filter(run_id="c-new").count() == 2
    assert summary.complete
    assert set(summary.as_dict()["cutoffs"]) == {
        "completed",
        "failed",
        "timed_out",
        "engines",
        "celery_engines",
    }


def test_batches_are_bounded_and_walk_everything() -> None:
    for n in range(7):
        finished("completed", 2 * DAY + timedelta(minutes=n), f"r{n}")
    seen: list[Batch] = []
    summary = prune(retention=policy({"COMPLETED": DAY}), batch_size=3, on_batch=seen.append)
    assert remaining() == set()
    assert [b.deleted["runs"] for b in seen if b.target == "completed"] == [3, 3, 1]
    assert summary.deleted["runs"] == 7


def test_dry_run_counts_and_deletes_nothing() -> None:
    for n in range(5):
        finished("failed", 40 * DAY, f"f{n}")
    EngineFactory(id="old-engine", stopped=True, stopped_at=db_now() - 30 * DAY)
    summary = prune(retention=policy(), dry_run=True, batch_size=2)
    assert summary.dry_run
    assert summary.deleted == {"runs": 5, "events": 10, "signals": 5, "updates": 5, "engines": 1}
    assert len(remaining()) == 5
    assert WorkflowEvent.objects.count() == 10
    assert Engine.objects.filter(id="old-engine").exists()


def test_status_and_older_than_select_what_to_prune() -> None:
    finished("completed", 2 * DAY, "c")
    finished("failed", 2 * DAY, "f")
    summary = prune(retention=policy(), statuses=["failed"], older_than=DAY, engines=False)
    assert remaining() == {"c"}
    assert summary.by_status == {"failed": 1}


@pytest.mark.parametrize(
    "options",
    [
        {"statuses": ["running"]},
        {"statuses": ["nope"]},
        {"statuses": "completed"},
        {"batch_size": 0},
        {"batch_size": 10**6},
        {"batch_size": "5"},
        {"batch_size": True},
        {"older_than": -1},
        {"older_than": "1d"},
        {"time_budget": 0},
        {"time_budget": float("nan")},
    ],
)
def test_bad_input_is_a_typed_error_and_changes_nothing(options: dict[str, Any]) -> None:
    finished("completed", 40 * DAY, "c")
    with pytest.raises(WeftConfigurationError):
        prune(retention=policy(), **options)
    assert remaining() == {"c"}


def test_a_child_whose_parent_is_still_waiting_is_kept() -> None:
    WorkflowRunFactory(id="parent", waiting=True)
    finished("completed", 40 * DAY, "kid", parent_id="parent")
    finished("completed", 40 * DAY, "p2")
    finished("completed", 40 * DAY, "kid2", parent_id="p2")
    finished("completed", 40 * DAY, "orphan", parent_id="long-gone")
    summary = prune(retention=policy({"COMPLETED": DAY}))
    assert remaining() == {"parent", "kid"}
    assert summary.skipped["waiting_parent"] == 1


def test_a_live_parent_waiting_on_its_child_still_gets_the_result(
    driver: WorkflowDriver,
) -> None:
    """A real parent parked on a real child that finished: the child survives."""
    weft.start("tests.parent", "tests.child_add", 5, workflow_id="p1")
    driver.run_until_idle(max_turns=1)  # the parent starts its child and parks
    child = WorkflowRun.objects.get(parent_id="p1")
    driver.engine.acquire(child.pk)
    driver.engine.drive(child.pk)
    assert WorkflowRun.objects.get(pk=child.pk).status == RunStatus.COMPLETED
    prune(retention=policy({"COMPLETED": 0}))
    assert WorkflowRun.objects.filter(pk=child.pk).exists()
    driver.run_until_idle()
    assert weft.result("p1", timeout=0)["result"] == 105
    prune(retention=policy({"COMPLETED": 0}))
    assert remaining() == set()


def test_claim_rows_are_never_deleted_and_a_restarted_id_gets_a_higher_epoch(
    driver: WorkflowDriver,
) -> None:
    weft.start("tests.steps", 2, workflow_id="again")
    driver.run_until_idle()
    first_epoch, holder = Claim.objects.values_list("epoch", "holder_id").get(workflow_id="again")
    assert holder is None
    summary = prune(retention=policy({"COMPLETED": 0}))
    assert summary.deleted["runs"] == 1
    assert Claim.objects.filter(workflow_id="again", epoch=first_epoch).exists()
    weft.start("tests.steps", 2, workflow_id="again")
    driver.run_until_idle()
    assert WorkflowRun.objects.get(pk="again").status == RunStatus.COMPLETED
    events = set(WorkflowEvent.objects.filter(run_id="again").values_list("epoch", flat=True))
    assert events and min(events) > first_epoch
    assert Claim.objects.get(workflow_id="again").epoch > first_epoch


def test_a_finished_run_whose_claim_is_still_held_is_left_for_later() -> None:
    owner = EngineFactory()
    run = finished("completed", 40 * DAY, "held")
    ClaimFactory(workflow_id=run.pk, holder=owner)
    summary = prune(retention=policy())
    assert remaining() == {"held"}
    assert summary.skipped["held"] == 1


def test_stopped_engines_go_unless_something_names_them() -> None:
    old = db_now() - 30 * DAY
    EngineFactory(id="gone", stopped=True, stopped_at=old)
    EngineFactory(id="recent", stopped=True, stopped_at=db_now() - timedelta(hours=1))
    EngineFactory(id="claims", stopped=True, stopped_at=old)
    ClaimFactory(workflow_id="x", holder=Engine.objects.get(id="claims"))
    GlobalLeaseFactory(holder=EngineFactory(id="leases", stopped=True, stopped_at=old))
    EngineFactory(id="live")
    summary = prune(retention=policy({"ENGINES": 7 * DAY}))
    assert set(Engine.objects.values_list("id", flat=True)) == {
        "recent",
        "claims",
        "leases",
        "live",
    }
    assert summary.deleted["engines"] == 1
    assert prune(retention=policy({"ENGINES": None})).deleted["engines"] == 0


def test_a_run_finishing_between_batches_is_judged_by_the_cutoff_taken_at_the_start() -> None:
    for n in range(4):
        finished("completed", 2 * DAY, f"old{n}")
    WorkflowRunFactory(id="late", running=True)

    def finish_late(batch: Batch) -> None:
        WorkflowRun.objects.filter(pk="late").update(status="completed", finished_at=db_now())

    prune(retention=policy({"COMPLETED": timedelta(seconds=1)}), batch_size=2, on_batch=finish_late)
    assert remaining() == {"late"}


@pytest.mark.postgres
@pytest.mark.mysql
def test_a_row_locked_by_another_transaction_is_skipped_not_waited_for() -> None:
    """A run row another transaction holds (an owner writing it) is skipped at once."""
    for n in range(3):
        finished("completed", 2 * DAY, f"r{n}")
    locked = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with transaction.atomic():
            list(WorkflowRun.objects.select_for_update().filter(pk="r1"))
            locked.set()
            release.wait(30)
        connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert locked.wait(10)
        summary = Pruner(retention=policy({"COMPLETED": DAY}), time_budget=20).run()
    finally:
        release.set()
        thread.join()
    assert summary.seconds < 10
    assert remaining() == {"r1"}
    assert summary.skipped["busy"] == 1
    assert prune(retention=policy({"COMPLETED": DAY})).deleted["runs"] == 1
    assert remaining() == set()


def test_the_time_budget_stops_between_batches() -> None:
    for n in range(6):
        finished("completed", 2 * DAY, f"r{n}")
    pruner = Pruner(retention=policy({"COMPLETED": DAY}), batch_size=2, time_budget=0.001)
    summary = pruner.run()
    assert not summary.complete
    assert len(remaining()) == 6 - summary.deleted["runs"]


def test_only_signals_updates_and_events_of_pruned_runs_go() -> None:
    finished("completed", 2 * DAY, "old")
    finished("completed", timedelta(hours=1), "new")
    prune(retention=policy({"COMPLETED": DAY}))
    assert set(WorkflowSignal.objects.values_list("run_id", flat=True)) == {"new"}
    assert set(UpdateRequest.objects.values_list("run_id", flat=True)) == {"new"}
