"""Store-wide passes racing each other and a live worker, on PostgreSQL: no run is
driven twice, no step runs twice, no update is answered twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import weft_django as weft
from example_project.orders.models import StepLog
from tests.concurrency import run_concurrently
from tests.updates import workflows as update_workflows  # noqa: F401 (registers tests.updates.*)
from tests.updates.conftest import send
from tests.workers import Running
from weft_django.conf import PassLimits
from weft_django.models import Claim, UpdateRequest, UpdateStatus, WorkflowEvent, WorkflowRun
from weft_django.runtime.engine import WorkflowEngine
from weft_django.runtime.passes.store import SIGNAL_POLL, UPDATE_POLL, run_store_pass
from weft_django.worker import Worker

from .conftest import expire_lease

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SIGNALLED = [f"race-sig-{i:02d}" for i in range(20)]
UPDATED = [f"race-upd-{i:02d}" for i in range(8)]


def test_two_passes_and_a_live_worker_never_drive_a_run_twice(weft_settings: Any) -> None:
    weft_settings(CLAIM_TTL=3.0, CLAIM_RENEW_INTERVAL=0.2, TICK_INTERVAL=0.02)
    crashed = WorkflowEngine().start()
    for run_id in SIGNALLED:
        weft.start("tests.steps_around_signal", workflow_id=run_id)
        crashed.claim_and_drive(run_id)
    for run_id in UPDATED:
        weft.start("tests.updates.counter", workflow_id=run_id)
        crashed.claim_and_drive(run_id)
    expire_lease(crashed)
    for run_id in SIGNALLED:
        weft.signal(run_id, "go")
    update_ids = {run_id: [send(run_id, "add", n) for n in (1, 2)] for run_id in UPDATED}

    limits = PassLimits.of(100, 30)
    worker = Running(Worker(concurrency=2, install_signal_handlers=False, shutdown_grace=5.0))
    try:
        summaries = run_concurrently(
            lambda: run_store_pass(SIGNAL_POLL, limits),
            lambda: run_store_pass(SIGNAL_POLL, limits),
            lambda: run_store_pass(UPDATE_POLL, limits),
            lambda: run_store_pass(UPDATE_POLL, limits),
            worker.wait_started,
            timeout=60,
        )[:4]
        for run_id in UPDATED:
            for update_id in update_ids[run_id]:
                assert weft.update(run_id, "add", update_id=update_id, timeout=30)["total"] >= 1
        for run_id in SIGNALLED:
            assert weft.result(run_id, timeout=30)["go"] is None
    finally:
        worker.stop()

    # Every step of every run ran exactly once (s0, s1 before the crash; s2, s3 after).
    steps = Counter(StepLog.objects.filter(run_id__in=SIGNALLED).values_list("run_id", "step"))
    assert set(steps.values()) == {1} and len(steps) == 4 * len(SIGNALLED)
    # Each update applied once, in its own event, answered once.
    for run_id, ids in update_ids.items():
        events = WorkflowEvent.objects.filter(run_id=run_id, kind="update")
        assert sorted(e.result["update_id"] for e in events) == sorted(ids)
        assert set(
            UpdateRequest.objects.filter(run_id=run_id).values_list("status", flat=True)
        ) == {UpdateStatus.APPLIED}
        answers = [e.result["response"]["total"] for e in events.order_by("seq")]
        assert answers == [1, 3]
    vocabulary = {"drained", "lost_race", "owner_notified"}
    assert all(set(s["counts"]) <= vocabulary for s in summaries)
    # The passes and the worker shared the work; none was left to a pass's failure.
    assert all(s["failures"] == [] for s in summaries)
    assert not Claim.objects.filter(holder__kind="celery").exists()
    assert not WorkflowRun.objects.exclude(status="completed").filter(pk__in=SIGNALLED).exists()
