"""A worker only ever claims runs of workflow types it has registered (docs/ownership.md)."""

from __future__ import annotations

import signal
import time

import pytest

import weft_django as weft
from tests.integration.helpers import FAST
from tests.integration.itapp.models import StepExecution
from tests.integration.queries import all_completed, duplicates, holder, naps
from weft_django.models import Claim, RunStatus, WorkflowRun

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TTL = float(FAST["WEFT_CLAIM_TTL"])
RENEW = float(FAST["WEFT_CLAIM_RENEW_INTERVAL"])
TAKEOVER_BOUND = TTL + 3 * RENEW
WITHOUT_SPECIAL = {"WEFT_IT_WORKFLOWS": "it.steps,it.waiter,it.noop_steps"}


def test_worker_without_the_type_never_claims_its_runs(workers, wait):
    lacking = workers.start("lacking", **WITHOUT_SPECIAL)
    assert "it.special" not in lacking.log()
    special = [weft.start("it.special", 2, workflow_id=f"special-{i}").id for i in range(3)]
    plain = [weft.start("it.steps", 2, workflow_id=f"plain-{i}").id for i in range(3)]

    wait(lambda: all_completed(plain), 30, what="the runs it can run")
    time.sleep(RENEW * 1.5)  # a reclaim scan (ownerless/pending candidates) ran too
    assert set(WorkflowRun.objects.filter(pk__in=special).values_list("status", flat=True)) == {
        RunStatus.PENDING
    }
    assert not Claim.objects.filter(workflow_id__in=special).exists()

    able = workers.start("able")
    wait(lambda: all_completed(special), 30, what="the worker with the type to run them")
    pids = set(StepExecution.objects.filter(run_id__in=special).values_list("pid", flat=True))
    assert pids == {able.pid}
    assert duplicates(special) == {}


def test_reclaim_scan_skips_expired_claims_of_unregistered_types(workers, wait):
    lacking = workers.start("lacking", **WITHOUT_SPECIAL)
    owner = workers.start("owner")
    run_id = "special-crash"
    # Only the owner can claim it; it naps inside, and is killed there.
    weft.start("it.special", 3, nap_at=1, nap_s=60, workflow_id=run_id)
    wait(lambda: naps(run_id), 30, what="the owner to start napping")
    assert holder(run_id) == owner.engine_id
    owner.send(signal.SIGKILL)
    owner.wait(10)

    # Well past the takeover bound: the worker that lacks the type never takes it.
    time.sleep(TAKEOVER_BOUND + 2 * RENEW)
    assert holder(run_id) == owner.engine_id
    assert len(naps(run_id)) == 1
    assert lacking.alive

    rescuer = workers.start("rescuer")
    wait(lambda: all_completed([run_id]), TAKEOVER_BOUND + 15, what="the rescuer to finish it")
    assert [pid for pid, _at in naps(run_id)] == [owner.pid, rescuer.pid]
    assert duplicates([run_id]) == {}
