"""Retry, fork and cancel with children against real workers, and ``manage.py
weft`` as a subprocess (the console is one more process that owns nothing)."""

from __future__ import annotations

import json
import signal
import time

import pytest

import weft_django as weft
from tests.integration.helpers import run_manage, sqlite_file, worker_env
from tests.integration.itapp.models import StepExecution
from weft_django.models import Claim, RunStatus, WorkflowRun

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def rows(run_id: str) -> list[str]:
    return list(
        StepExecution.objects.filter(run_id=run_id, kind="step").values_list("step", flat=True)
    )


def test_retry_and_fork_run_on_a_worker(workers, wait):
    weft.start("it.steps", 4, workflow_id="done")
    weft.start("it.fails", workflow_id="broken")
    workers.start("w")
    finished = (RunStatus.COMPLETED, RunStatus.FAILED)
    wait(
        lambda: WorkflowRun.objects.filter(status__in=finished).count() == 2,
        30,
        what="both runs to finish",
    )
    forked = weft.fork("done", from_step=2, new_id="forked")
    retried = weft.retry("broken", new_id="retried")
    assert forked.result(timeout=30) == 4
    with pytest.raises(weft.WorkflowFailedError):
        retried.result(timeout=30)
    assert rows("done") == ["s0", "s1", "s2", "s3"]
    assert rows("forked") == ["s2", "s3"]  # s0, s1 ran zero times again; s2, s3 once
    assert WorkflowRun.objects.get(pk="retried").origin_id == "broken"


NAP_S = 6.0


def test_cancel_with_children_across_workers_with_a_frozen_holder(workers, wait):
    """Root and middle node held by one worker, the leaf by another, frozen in
    the leaf's slow step across the cancel."""
    # Claims that outlive the test's freezes (a takeover of the frozen leaf by the
    # nodes' worker, which can run it too, would finish the tree before the cancel
    # on a loaded machine); pickups go through the fast tick.
    slow = {"WEFT_CLAIM_TTL": "60", "WEFT_CLAIM_RENEW_INTERVAL": "20"}
    nodes = workers.start("nodes", ready=False, WEFT_IT_WORKFLOWS="it.tree,it.tree_leaf", **slow)
    leaves = workers.start("leaves", ready=False, WEFT_IT_WORKFLOWS="it.tree_leaf", **slow)
    workers.wait_ready(nodes)
    workers.wait_ready(leaves)
    # The leaf's slow step lasts long enough for its holder to be frozen inside
    # it even on a loaded machine (CI runs several suites at once on 2 cores).
    weft.start("it.tree", 3, NAP_S, workflow_id="t")
    leaf, middle = "t/child-1/child-1", "t/child-1"
    parked = WorkflowRun.objects.filter(status=RunStatus.WAITING)
    wait(lambda: parked.count() == 3, 30, what="the tree to park")
    # The leaf onto the leaves' worker: with the other frozen, only it can take it.
    nodes.freeze(sqlite_file())
    weft.suspend(leaf)
    weft.resume(leaf)
    weft.signal(leaf, "go")
    wait(
        lambda: StepExecution.objects.filter(run_id=leaf, kind="nap").exists(),
        30,
        what="the leaf's slow step to start",
    )
    leaves.freeze(sqlite_file())
    nodes.send(signal.SIGCONT)
    holders = dict(Claim.objects.values_list("workflow_id", "holder_id"))
    assert holders[leaf] == leaves.engine_id
    assert holders["t"] == holders[middle] == nodes.engine_id
    result = run_manage(
        ["weft", "cancel", "t", "--children", "--yes", "--json", "--reason", "tree"],
        worker_env(workers.db_url),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)[0]["detail"] == "cancelled with 2 descendant(s)"
    leaves.send(signal.SIGCONT)
    statuses = dict(WorkflowRun.objects.values_list("pk", "status"))
    assert statuses == {pk: RunStatus.CANCELLED for pk in ("t", middle, leaf)}
    # The leaf's slow step ends: its checkpoint is refused, the worker drops it.
    wait(
        lambda: f"deposed from {leaf}" in leaves.log(),
        NAP_S + 10,
        what="the leaf's holder to drop it",
    )
    time.sleep(0.3)
    assert rows(leaf) == []  # the leaf's checkpoint is fenced out: no step of it ran after
    assert rows("t") == rows(middle) == ["enter"]
    assert set(WorkflowRun.objects.values_list("status", flat=True)) == {RunStatus.CANCELLED}
    assert leaves.alive and nodes.alive
