"""``weft_django.beat``: beat schedule entries, and django-celery-beat's
DatabaseScheduler reading them from its models (docs/celery.md)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from example_project import celery_app
from weft_django.beat import (
    SIGNAL_POLL_TASK,
    UPDATE_POLL_TASK,
    beat_entry,
    beat_schedule,
    install_periodic_tasks,
)
from weft_django.exceptions import WeftConfigurationError


def _beat() -> tuple[Any, Any, Any]:
    """django-celery-beat (the ``beat`` extra; it supports Django < 6.1 today)."""
    pytest.importorskip("django_celery_beat", reason="the beat extra is not installed")
    from django_celery_beat.models import IntervalSchedule, PeriodicTask
    from django_celery_beat.schedulers import DatabaseScheduler

    return IntervalSchedule, PeriodicTask, DatabaseScheduler


def test_beat_schedule_defaults() -> None:
    schedule = beat_schedule()
    assert schedule == {
        SIGNAL_POLL_TASK: {
            "task": SIGNAL_POLL_TASK,
            "schedule": 30.0,
            "kwargs": {"batch_size": 500, "time_budget": 15.0},
            "options": {"expires": 30.0},
        },
        UPDATE_POLL_TASK: {
            "task": UPDATE_POLL_TASK,
            "schedule": 30.0,
            "kwargs": {"batch_size": 500, "time_budget": 15.0},
            "options": {"expires": 30.0},
        },
    }
    assert json.loads(json.dumps(schedule)) == schedule  # nothing a JSON broker cannot carry


def test_intervals_budgets_and_leaving_a_pass_out() -> None:
    schedule = beat_schedule(signal_every=timedelta(seconds=10), update_every=None, batch_size=50)
    assert list(schedule) == [SIGNAL_POLL_TASK]
    entry = schedule[SIGNAL_POLL_TASK]
    assert entry["schedule"] == 10.0 and entry["options"] == {"expires": 10.0}
    # the time budget is shorter than the interval, so beats never overlap a pass
    assert entry["kwargs"] == {"batch_size": 50, "time_budget": 5.0}


def test_beat_entry_is_the_building_block_for_more_tasks() -> None:
    assert beat_entry("weft_django.other", 60, limit=3) == {
        "task": "weft_django.other",
        "schedule": 60.0,
        "kwargs": {"limit": 3},
        "options": {"expires": 60.0},
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"signal_every": 0},
        {"signal_every": -5},
        {"update_every": "30"},
        {"update_every": True},
        {"signal_every": float("inf")},
        {"batch_size": 0},
        {"batch_size": 2.5},
    ],
)
def test_bad_values_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(WeftConfigurationError):
        beat_schedule(**kwargs)


@pytest.mark.django_db
def test_install_periodic_tasks_writes_django_celery_beat_models() -> None:
    IntervalSchedule, PeriodicTask, DatabaseScheduler = _beat()
    names = install_periodic_tasks(beat_schedule(signal_every=20, update_every=60))
    assert names == [SIGNAL_POLL_TASK, UPDATE_POLL_TASK]
    assert install_periodic_tasks(beat_schedule(signal_every=20, update_every=60)) == names

    rows = {row.task: row for row in PeriodicTask.objects.all()}
    assert set(rows) == {SIGNAL_POLL_TASK, UPDATE_POLL_TASK}  # idempotent: no duplicates
    signal_row = rows[SIGNAL_POLL_TASK]
    assert (signal_row.interval.every, signal_row.interval.period) == (20, IntervalSchedule.SECONDS)
    assert json.loads(signal_row.kwargs) == {"batch_size": 500, "time_budget": 10.0}
    assert signal_row.expire_seconds == 20

    scheduler = DatabaseScheduler(app=celery_app, lazy=True)
    entries = scheduler.all_as_schedule()
    assert entries[SIGNAL_POLL_TASK].task == SIGNAL_POLL_TASK
    assert entries[SIGNAL_POLL_TASK].kwargs == {"batch_size": 500, "time_budget": 10.0}
    assert entries[UPDATE_POLL_TASK].schedule.run_every == timedelta(seconds=60)


@pytest.mark.django_db
def test_install_periodic_tasks_refuses_fractional_seconds_and_writes_nothing() -> None:
    _IntervalSchedule, PeriodicTask, _DatabaseScheduler = _beat()
    with pytest.raises(WeftConfigurationError, match="whole seconds"):
        install_periodic_tasks(beat_schedule(signal_every=30, update_every=0.5))
    assert not PeriodicTask.objects.exists()


def test_the_old_import_path_of_the_schedule_helpers_still_works() -> None:
    """Settings written before weft_django.beat import from weft_django.celery."""
    from weft_django import beat
    from weft_django.celery import beat_entry, beat_schedule, install_periodic_tasks

    assert beat_schedule is beat.beat_schedule
    assert beat_entry is beat.beat_entry
    assert install_periodic_tasks is beat.install_periodic_tasks
