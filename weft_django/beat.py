"""Celery beat schedule entries for weft_django's tasks (docs/celery.md).

::

    # settings.py
    from weft_django.beat import beat_schedule

    CELERY_BEAT_SCHEDULE = {**beat_schedule(signal_every=30, update_every=30, prune_every=3600)}

Nothing here imports Celery or touches the database, so a settings module can
call :func:`beat_schedule`. Each entry runs its pass with a time budget of half
its interval and expires (is discarded unstarted) after one interval, so beats
that find the workers busy or down never pile up.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from .conf import (
    PASS_BATCH,
    PRUNE_BATCH,
    PRUNE_MAX_BATCH,
    PassLimits,
    check_batch_size,
    duration_seconds,
)
from .exceptions import WeftConfigurationError

SIGNAL_POLL_TASK = "weft_django.signal_poll_pass"
UPDATE_POLL_TASK = "weft_django.update_poll_pass"
PRUNE_TASK = "weft_django.prune_pass"
#: Every task name of weft_django (what the system check knows).
TASKS = (SIGNAL_POLL_TASK, UPDATE_POLL_TASK, PRUNE_TASK)
#: A pass's time budget, as a share of its beat interval.
BUDGET_SHARE = 0.5

Interval = float | int | timedelta


def interval_seconds(every: Any, what: str = "every") -> float:
    """Seconds of a beat interval: a positive number of seconds or a ``timedelta``."""
    seconds = duration_seconds(every)
    if seconds is None or seconds <= 0:
        raise WeftConfigurationError(
            f"{what} must be a positive number of seconds or a timedelta, got {every!r}."
        )
    return seconds


def beat_entry(task: str, every: Interval, **kwargs: Any) -> dict[str, Any]:
    """One ``CELERY_BEAT_SCHEDULE`` entry: run ``task(**kwargs)`` every ``every``
    seconds; a message not started within one interval expires."""
    seconds = interval_seconds(every, f"the interval of {task}")
    return {"task": task, "schedule": seconds, "kwargs": kwargs, "options": {"expires": seconds}}


def _pass_entry(task: str, every: Interval, batch_size: int) -> dict[str, Any]:
    seconds = interval_seconds(every, f"the interval of {task}")
    limits = PassLimits.of(batch_size, seconds * BUDGET_SHARE)
    return beat_entry(task, seconds, batch_size=limits.batch_size, time_budget=limits.time_budget)


def beat_schedule(
    *,
    signal_every: Interval | None = 30.0,
    update_every: Interval | None = 30.0,
    batch_size: int = PASS_BATCH,
    prune_every: Interval | None = None,
    prune_batch_size: int = PRUNE_BATCH,
) -> dict[str, dict[str, Any]]:
    """Ready ``CELERY_BEAT_SCHEDULE`` entries for the store-wide signal and update
    poll passes (``None`` leaves a pass out), keyed by task name; with
    ``prune_every``, also the retention pass (docs/retention.md), off by default.
    ``batch_size`` and ``prune_batch_size`` default to 500 runs
    (``weft_django.conf.PASS_BATCH`` and ``PRUNE_BATCH``).

    Bad values raise :class:`~weft_django.exceptions.WeftConfigurationError`.
    """
    wanted = {SIGNAL_POLL_TASK: signal_every, UPDATE_POLL_TASK: update_every}
    schedule = {
        task: _pass_entry(task, every, batch_size)
        for task, every in wanted.items()
        if every is not None
    }
    if prune_every is not None:
        check_batch_size(prune_batch_size, "prune_batch_size", maximum=PRUNE_MAX_BATCH)
        schedule[PRUNE_TASK] = _pass_entry(PRUNE_TASK, prune_every, prune_batch_size)
    return schedule


def install_periodic_tasks(
    schedule: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """Write ``schedule`` (default: :func:`beat_schedule`) into django-celery-beat's
    tables, for its ``DatabaseScheduler``; returns the entry names. Idempotent:
    an existing entry of the same name is updated.

    Intervals must be whole seconds (django-celery-beat stores integers); an
    entry's ``expires`` option becomes the row's ``expire_seconds``.
    """
    try:
        from django_celery_beat.schedulers import ModelEntry
    except ImportError as exc:
        raise WeftConfigurationError(
            "install_periodic_tasks() needs django-celery-beat (pip install "
            "django-celery-beat, and add 'django_celery_beat' to INSTALLED_APPS)."
        ) from exc
    schedule = beat_schedule() if schedule is None else schedule
    rows = {}
    for name, entry in schedule.items():
        seconds = interval_seconds(entry.get("schedule"), f"the interval of {name}")
        if seconds != int(seconds):
            raise WeftConfigurationError(
                f"the interval of {name} must be whole seconds for django-celery-beat, "
                f"got {seconds:g}."
            )
        options = dict(entry.get("options") or {})
        expires = options.pop("expires", None)
        if expires is not None:
            options["expire_seconds"] = int(interval_seconds(expires, f"expires of {name}"))
        rows[name] = {**entry, "schedule": timedelta(seconds=seconds), "options": options}
    for name, fields in rows.items():
        ModelEntry.from_entry(name, **fields)
    return list(rows)
