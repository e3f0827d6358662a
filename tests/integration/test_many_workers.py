"""Three worker processes share 200 runs: all complete, each step commits once."""

from __future__ import annotations

import time

import pytest

import weft_django as weft
from tests.integration.itapp.models import StepExecution
from tests.integration.queries import all_completed, duplicates, statuses, step_counts
from weft_django.models import Claim

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

RUNS = 200
STEPS = 5


def test_three_workers_share_200_runs_and_commit_each_step_once(workers, wait):
    run_ids = [weft.start("it.steps", STEPS, workflow_id=f"many-{i:03d}").id for i in range(RUNS)]
    started = [workers.start(f"w{i}", ready=False) for i in range(3)]
    for process in started:
        workers.wait_ready(process)
    began = time.monotonic()

    wait(lambda: all_completed(run_ids), 180, interval=0.2, what=f"{RUNS} runs to complete")
    elapsed = time.monotonic() - began

    counts = step_counts(run_ids)
    assert len(counts) == RUNS * STEPS, statuses(run_ids)
    assert duplicates(run_ids) == {}
    by_pid = {
        pid: StepExecution.objects.filter(kind="step", pid=pid).count()
        for pid in (process.pid for process in started)
    }
    print(f"{RUNS} runs x {STEPS} steps in {elapsed:.1f}s; steps per worker pid: {by_pid}")
    assert sum(by_pid.values()) == RUNS * STEPS
    assert sum(1 for count in by_pid.values() if count) > 1, by_pid
    # Terminal commits release their claims in the same transaction.
    assert not Claim.objects.filter(workflow_id__in=run_ids, holder__isnull=False).exists()
