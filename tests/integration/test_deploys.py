"""A rolling deploy with real worker processes (docs/deploying-code.md): an old
worker that has only ``it.versioned`` v1 and the unpatched ``it.patchable``, a
new one that has v1 and v2 and the patch. Runs of both versions are started,
the old worker is stopped mid-way: every run completes on a worker that has
its version, none is suspended, none is ever claimed by a worker without its
version, and the patched workflow takes its old path on the run started
before the deploy and its new one on the run started after.
"""

from __future__ import annotations

import signal

import pytest

import weft_django as weft
from tests.integration.itapp.models import StepExecution
from tests.integration.queries import all_completed, statuses
from weft_django.models import RunStatus, WorkflowEvent, WorkflowRun

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def all_waiting(run_ids: list[str]) -> bool:
    return statuses(run_ids).get(RunStatus.WAITING) == len(run_ids)


def engines_of(run_ids: list[str]) -> set[str]:
    """Every engine that wrote an event of these runs (their claims' holders)."""
    events = WorkflowEvent.objects.filter(run_id__in=run_ids)
    return set(events.values_list("engine_id", flat=True))


def test_rolling_deploy_each_run_on_a_worker_with_its_version(workers, wait):
    old = workers.start("old", WEFT_IT_VERSIONS="1")
    early = [
        weft.start("it.versioned", version=1, workflow_id=f"v1-early-{i}").id for i in range(3)
    ]
    weft.start("it.patchable", workflow_id="patch-old")
    wait(lambda: all_waiting([*early, "patch-old"]), 30, what="the old worker to park its runs")

    new = workers.start("new", WEFT_IT_VERSIONS="1,2", WEFT_IT_PATCHED="1")
    v2 = [weft.start("it.versioned", workflow_id=f"v2-{i}").id for i in range(3)]
    late = [weft.start("it.versioned", version=1, workflow_id=f"v1-late-{i}").id for i in range(3)]
    wait(lambda: all_waiting([*v2, *late]), 30, what="the runs of both versions to park")

    old.send(signal.SIGTERM)  # mid-way: it holds v1 runs waiting for their signal
    assert old.wait(30) == 0  # SIGTERM, 5-s grace: room for a loaded CI machine
    weft.start("it.patchable", workflow_id="patch-new")
    runs = [*early, *v2, *late, "patch-old", "patch-new"]
    wait(lambda: all_waiting(["patch-new"]), 30, what="the new worker to park patch-new")
    for run_id in runs:
        weft.signal(run_id, "go")
    wait(lambda: all_completed(runs), 30, what="every run to complete")

    assert not WorkflowRun.objects.filter(status=RunStatus.SUSPENDED).exists()
    for run_id in [*early, *late]:
        assert weft.result(run_id, timeout=0) == {"code": 1, "version": 1}
    for run_id in v2:
        assert weft.result(run_id, timeout=0) == {"code": 2, "version": 2}
    # No v2 run was ever held by the old worker: every event is the new one's.
    assert engines_of(v2) == {new.engine_id}
    assert set(StepExecution.objects.filter(run_id__in=v2).values_list("pid", flat=True)) == {
        new.pid
    }
    # The v1 runs the old worker held were finished by the new one after it stopped.
    assert engines_of(early) == {old.engine_id, new.engine_id}
    # The patch: the run started before the deploy kept its path, the new one took its own.
    assert weft.result("patch-old", timeout=0) == "old"
    assert weft.result("patch-new", timeout=0) == "new"
    kinds = dict.fromkeys(["patch-old", "patch-new"])
    for run_id in kinds:
        kinds[run_id] = list(
            WorkflowEvent.objects.filter(run_id=run_id).order_by("seq").values_list("kind", "name")
        )
    assert kinds["patch-old"] == [
        ("step", "a"),
        ("wait", "signal:go"),
        ("signal", "go"),
        ("step", "b"),
    ]
    assert kinds["patch-new"][:3] == [("step", "a"), ("patch", "extra"), ("step", "extra")]
