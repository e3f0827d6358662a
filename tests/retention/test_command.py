"""``manage.py weft_prune``: output, dry run, options, and bad input (nothing changed)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.factories import EngineFactory, WorkflowEventFactory, WorkflowRunFactory
from weft_django.models import Engine, WorkflowEvent, WorkflowRun
from weft_django.ownership.clock import db_now

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


@pytest.fixture
def store() -> None:
    for n, status in enumerate(["completed", "completed", "failed", "cancelled"]):
        run = WorkflowRunFactory(id=f"old-{n}", status=status, finished_at=db_now() - 60 * DAY)
        WorkflowEventFactory(run=run, seq=1)
    WorkflowRunFactory(id="fresh", status="completed", finished_at=db_now())
    WorkflowRunFactory(id="live", status="running", created_at=db_now() - 90 * DAY)
    EngineFactory(id="stopped-long-ago", stopped=True, stopped_at=db_now() - 60 * DAY)


def prune(*args: str) -> str:
    out = StringIO()
    call_command("weft_prune", *args, stdout=out)
    return out.getvalue()


def runs() -> set[str]:
    return set(WorkflowRun.objects.values_list("id", flat=True))


def test_prints_what_it_deleted_per_table(store: None) -> None:
    out = prune()
    assert "Deleted 4 runs" in out
    assert "Deleted 4 events" in out
    assert "Deleted 1 engines" in out
    assert "completed: 2 run(s)" in out
    assert runs() == {"fresh", "live"}
    assert not Engine.objects.filter(id="stopped-long-ago").exists()


def test_dry_run_prints_counts_and_deletes_nothing(store: None) -> None:
    out = prune("--dry-run", "--batch-size", "1")
    assert "Would delete 4 runs" in out
    assert "Would delete 1 engines" in out
    assert len(runs()) == 6
    assert WorkflowEvent.objects.count() == 4
    assert Engine.objects.filter(id="stopped-long-ago").exists()


def test_status_limits_runs_and_leaves_engines(store: None) -> None:
    out = prune("--status", "failed", "cancelled", "-v", "2")
    assert "batch failed: runs=1 events=1" in out
    assert runs() == {"old-0", "old-1", "fresh", "live"}
    assert Engine.objects.filter(id="stopped-long-ago").exists()


def test_older_than_overrides_the_settings(store: None, settings: Any) -> None:
    settings.WEFT = {"RETENTION": {"COMPLETED": None}}
    assert "Deleted 0 runs" in prune("--status", "completed")
    prune("--older-than", "30d", "--status", "completed")
    assert runs() == {"old-2", "old-3", "fresh", "live"}
    prune("--older-than", "0")  # completed runs are kept forever unless --status names them
    assert runs() == {"fresh", "live"}
    prune("--older-than", "0", "--status", "completed")
    assert runs() == {"live"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status", "running"], "only finished runs are pruned"),
        (["--status", "bogus"], "only finished runs are pruned"),
        (["--older-than", "soon"], "is not a duration"),
        (["--older-than=-3d"], "is not a duration"),
        (["--batch-size", "0"], "batch_size must be from 1"),
        (["--batch-size", "1000000"], "batch_size must be from 1"),
        (["--time-budget", "0"], "time_budget must be a positive"),
        (["--time-budget", "-1"], "time_budget must be a positive"),
        (["--database", "nope"], "not a configured database alias"),
    ],
)
def test_bad_input_is_a_command_error_and_changes_nothing(
    store: None, args: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        prune(*args)
    assert len(runs()) == 6
    assert Engine.objects.filter(id="stopped-long-ago").exists()


def test_bad_settings_are_a_command_error(store: None, settings: Any) -> None:
    settings.WEFT = {"RETENTION": {"COMPLETED": -5}}
    with pytest.raises(CommandError, match=r"weft\.E016"):
        prune("--skip-checks")
    assert len(runs()) == 6
