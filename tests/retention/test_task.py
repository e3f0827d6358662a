"""``weft_django.prune_pass`` through Celery's eager path, and its beat entry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import Celery

from example_project import celery_app
from tests.factories import WorkflowEventFactory, WorkflowRunFactory
from weft_django.beat import PRUNE_TASK, TASKS, beat_schedule
from weft_django.exceptions import WeftConfigurationError
from weft_django.models import WorkflowRun
from weft_django.ownership.clock import db_now
from weft_django.tasks import prune_pass


@pytest.fixture
def eager() -> Iterator[Celery]:
    assert celery_app is not None
    conf = celery_app.conf
    saved = (conf.task_always_eager, conf.task_eager_propagates)
    conf.task_always_eager, conf.task_eager_propagates = True, True
    yield celery_app
    conf.task_always_eager, conf.task_eager_propagates = saved


def old_runs(count: int) -> None:
    for n in range(count):
        run = WorkflowRunFactory(
            id=f"old-{n}", status="failed", finished_at=db_now() - timedelta(days=60)
        )
        WorkflowEventFactory(run=run, seq=1)


def test_the_name_is_fixed_and_known_to_the_check() -> None:
    assert prune_pass.name == PRUNE_TASK == "weft_django.prune_pass"
    assert PRUNE_TASK in TASKS


@pytest.mark.django_db
def test_eager_pass_prunes_and_returns_a_json_summary(eager: Celery) -> None:
    old_runs(5)
    summary = prune_pass.delay(batch_size=2, time_budget=30).get()
    assert json.loads(json.dumps(summary)) == summary
    assert summary["deleted"]["runs"] == 5 and summary["deleted"]["events"] == 5
    assert summary["batches"] >= 3 and summary["complete"] is True
    assert not WorkflowRun.objects.exists()


@pytest.mark.django_db
def test_eager_dry_run_deletes_nothing(eager: Celery) -> None:
    old_runs(2)
    summary = prune_pass.delay(dry_run=True).get()
    assert summary["dry_run"] and summary["deleted"]["runs"] == 2
    assert WorkflowRun.objects.count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 0},
        {"batch_size": 10**6},
        {"batch_size": "5"},
        {"time_budget": 0},
        {"time_budget": "soon"},
        {"dry_run": "yes"},
    ],
)
def test_bad_arguments_raise_and_delete_nothing(eager: Celery, kwargs: dict[str, Any]) -> None:
    old_runs(2)
    with pytest.raises(WeftConfigurationError):
        prune_pass.delay(**kwargs).get()
    assert WorkflowRun.objects.count() == 2


def test_beat_entry_only_when_asked() -> None:
    assert PRUNE_TASK not in beat_schedule()
    entry = beat_schedule(prune_every=3600, prune_batch_size=1000)[PRUNE_TASK]
    assert entry == {
        "task": PRUNE_TASK,
        "schedule": 3600.0,
        "kwargs": {"batch_size": 1000, "time_budget": 1800.0},
        "options": {"expires": 3600.0},
    }
    for bad in ({"prune_every": 0}, {"prune_every": 60, "prune_batch_size": 0}):
        with pytest.raises(WeftConfigurationError):
            beat_schedule(**bad)
