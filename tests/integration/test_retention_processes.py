"""Retention with real processes: the Celery beat prune pass (``celery worker`` and
``celery beat`` on the test Redis) and the worker prune pass of two
``manage.py weft_worker`` processes (only the pruner-lease holder prunes), while
workflows run (docs/retention.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import transaction

import weft_django as weft
from tests.factories import WorkflowEventFactory, WorkflowRunFactory
from tests.integration.conftest import CeleryProcesses, Workers
from weft_django.models import Claim, PrunerLease, WorkflowEvent, WorkflowRun
from weft_django.ownership.clock import db_now

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: Runs finished longer ago than the processes' COMPLETED retention (an hour).
RETAIN = {"WEFT_RETENTION_COMPLETED": "3600"}


def old_runs(prefix: str, count: int) -> set[str]:
    """``count`` runs finished two days ago, each with an event. Each run and its
    event commit together: a live pruner may delete the run as soon as it is
    visible, and an event inserted after that would break the foreign key."""
    ids = set()
    for n in range(count):
        with transaction.atomic():
            run = WorkflowRunFactory(
                id=f"{prefix}-{n}",
                workflow_name="it.steps",
                status="completed",
                finished_at=db_now() - timedelta(days=2),
            )
            WorkflowEventFactory(run=run, seq=1)
        ids.add(run.pk)
    return ids


def left(ids: set[str]) -> set[str]:
    return set(WorkflowRun.objects.filter(pk__in=ids).values_list("id", flat=True))


@pytest.mark.redis
def test_beat_prune_pass_deletes_old_runs_and_spares_fresh_ones(
    workers: Workers, celery: CeleryProcesses, wait: Callable[..., object]
) -> None:
    old = old_runs("beat-old", 25)
    workers.start("driver", **RETAIN)
    weft.start("it.steps", 3, workflow_id="fresh")
    assert weft.result("fresh", timeout=30) == 3
    celery.worker(**RETAIN, WEFT_BEAT_PRUNE_EVERY="1")
    celery.beat(**RETAIN, WEFT_BEAT_PRUNE_EVERY="1")
    wait(lambda: not left(old), 30, what="the beat prune pass")
    assert WorkflowRun.objects.filter(pk="fresh").exists()
    assert not WorkflowEvent.objects.filter(run_id__in=old).exists()
    assert WorkflowEvent.objects.filter(run_id="fresh").exists()


def test_two_workers_only_the_lease_holder_prunes_and_restarted_ids_get_higher_epochs(
    workers: Workers, wait: Callable[..., object]
) -> None:
    env = {**RETAIN, "WEFT_PRUNE_WORKER_INTERVAL": "1"}
    first = workers.start("w1", **env)
    second = workers.start("w2", **env)
    weft.start("it.steps", 2, workflow_id="again")
    assert weft.result("again", timeout=30) == 2
    epoch = Claim.objects.values_list("epoch", flat=True).get(workflow_id="again")
    WorkflowRun.objects.filter(pk="again").update(finished_at=db_now() - timedelta(days=2))
    old = old_runs("w-old", 30) | {"again"}
    wait(lambda: not left(old), 30, what="the worker prune pass")
    more = old_runs("w-more", 10)
    wait(lambda: not left(more), 30, what="a second prune pass")
    holder = PrunerLease.objects.values_list("holder", flat=True).get()
    assert holder in (first.engine_id, second.engine_id)
    pruner, other = (first, second) if holder == first.engine_id else (second, first)
    assert "prune pass" in pruner.log()
    assert "prune pass" not in other.log()
    # The claim row outlived the run: the id restarted is claimed at a higher epoch.
    assert Claim.objects.values_list("epoch", flat=True).get(workflow_id="again") == epoch
    weft.start("it.steps", 2, workflow_id="again")
    assert weft.result("again", timeout=30) == 2
    assert Claim.objects.values_list("epoch", flat=True).get(workflow_id="again") > epoch
    assert min(WorkflowEvent.objects.filter(run_id="again").values_list("epoch", flat=True)) > epoch
