"""The schedule verbs (docs/schedules.md): pause, resume and trigger a declared
cron schedule from any process, audited like the run operations (one code path
with the admin and ``manage.py weft_schedules``:
:mod:`weft_django.schedules.operations`)."""

from __future__ import annotations

from typing import Any

from ..schedules import operations
from .runs import WorkflowHandle


def pause_schedule(
    name: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> bool:
    """Pause the schedule ``name``: its ticks are not fired until it is resumed.

    Returns False when it was already paused (nothing is written then).
    ``ScheduleNotFoundError`` when no schedule of that name is declared.
    ``reason`` (at most 500 characters) and ``by`` (a user or a name) are logged
    on ``weft_django.operations``; a user also gets a Django admin ``LogEntry``.
    """
    return operations.pause(name, reason=reason, by=by, using=using)


def resume_schedule(
    name: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> bool:
    """Resume a paused schedule from its next tick after now (the ticks of the
    pause are not caught up). False when it was not paused; errors and audit
    as for :func:`pause_schedule`."""
    return operations.resume(name, reason=reason, by=by, using=using)


def trigger_schedule(
    name: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> WorkflowHandle:
    """Start one run of the schedule now, with its arguments, paused or not.

    The run's id is ``schedule:<name>:<UTC ISO time with microseconds>``; the
    schedule's next tick is unchanged. Errors and audit as for
    :func:`pause_schedule`, and those of :func:`~weft_django.start`.
    """
    return operations.trigger(name, reason=reason, by=by, using=using)


__all__ = ["pause_schedule", "resume_schedule", "trigger_schedule"]
