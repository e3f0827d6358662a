"""The worker prune pass in-process: off by default, one pruner at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tests.factories import WorkflowEventFactory, WorkflowRunFactory
from weft_django.models import PrunerLease, WorkflowRun
from weft_django.ownership.clock import db_now
from weft_django.retention.settings import policy
from weft_django.worker.prune_thread import PruneLoop, prune_loop

pytestmark = pytest.mark.django_db(transaction=True)


def old_runs(count: int, prefix: str = "old") -> None:
    for n in range(count):
        run = WorkflowRunFactory(
            id=f"{prefix}-{n}", status="completed", finished_at=db_now() - timedelta(days=30)
        )
        WorkflowEventFactory(run=run, seq=1)


def test_off_by_default(settings: Any) -> None:
    settings.WEFT = {}
    assert prune_loop("e1", threading.Event()) is None


def test_two_loops_only_the_lease_holder_prunes() -> None:
    retention = policy({"WORKER_INTERVAL": 1, "BATCH_SIZE": 3})
    stop = threading.Event()
    first, second = PruneLoop("w1", retention, stop), PruneLoop("w2", retention, stop)
    old_runs(7)
    assert first.once() is not None
    assert second.once() is None
    assert not WorkflowRun.objects.exists()
    old_runs(2, "more")
    assert second.once() is None
    summary = first.once()
    assert summary is not None and summary.deleted["runs"] == 2
    assert PrunerLease.objects.values_list("holder", flat=True).get() == "w1"


def test_a_pass_stops_after_the_batch_in_hand_when_the_lease_is_lost() -> None:
    retention = policy({"WORKER_INTERVAL": 1, "BATCH_SIZE": 2})
    loop = PruneLoop("w1", retention, threading.Event())
    old_runs(6)
    assert loop.lease.try_acquire()
    PrunerLease.objects.update(holder="someone-else", token=99)
    assert loop.once() is None  # the renewal fails, the pass stops
    assert WorkflowRun.objects.count() == 6  # renew first, then prune: nothing deleted


def test_the_worker_starts_the_thread_when_configured(
    start_worker: Callable[..., Any], fast: Callable[..., None]
) -> None:
    fast(RETENTION={"WORKER_INTERVAL": 1, "COMPLETED": 3600})
    old_runs(3)
    running = start_worker()
    pause = threading.Event()
    for _ in range(100):
        if not WorkflowRun.objects.exists():
            break
        pause.wait(0.1)
    assert not WorkflowRun.objects.exists()
    assert "weft-prune" in {thread.name for thread in running.worker.supervisor.threads}
    running.stop()
    assert PrunerLease.objects.values_list("holder", flat=True).get() == ""
