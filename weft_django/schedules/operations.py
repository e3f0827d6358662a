"""What an operator does to schedules, audited: pause, resume, trigger now
(docs/schedules.md). One code path for the admin, the public verbs
(``weft.pause_schedule`` ...) and ``manage.py weft_schedules``.

As for runs (:mod:`weft_django.operations`): ``by`` (a user or a name) and
``reason`` (at most 500 characters) are logged at INFO on
``weft_django.operations``, and a user gets a Django admin ``LogEntry`` on the
schedule, written in the operation's transaction.

* pause: the firing pass leaves the schedule alone (its ticks are not fired);
* resume: firing starts again from the next tick after now (ticks of the
  pause are not caught up);
* trigger: start one run now, ``schedule:<name>:<UTC ISO time, microseconds>``,
  outside the tick sequence (the schedule's next tick is unchanged).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db import IntegrityError, router, transaction

from ..api.runs import WorkflowHandle, start
from ..exceptions import ScheduleNotFoundError
from ..models import Schedule, db_for
from ..operations import actor_name, check_reason, user_id_of
from ..ownership import db_now
from .cron import iso
from .declare import ScheduleSpec, declared

logger = logging.getLogger("weft_django.operations")

DONE = {"pause": "paused", "resume": "resumed", "trigger": "triggered"}


def spec_of(name: str) -> ScheduleSpec:
    """The declared schedule ``name``; ``ScheduleNotFoundError`` otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"a schedule name is a string, not {type(name).__name__}")
    spec = declared().get(name)
    if spec is None:
        raise ScheduleNotFoundError(name)
    return spec


def row_of(spec: ScheduleSpec, now: datetime, using: str) -> Schedule:
    """The schedule's row, created (synced) when no worker has synced it yet."""
    row = Schedule.objects.using(using).filter(name=spec.name).first()
    if row is not None:
        return row
    cron = spec.parsed()
    try:
        with transaction.atomic(using=using):
            return Schedule.objects.using(using).create(
                name=spec.name,
                workflow_name=spec.workflow_name,
                cron=cron.expression,
                timezone=cron.timezone,
                catch_up=spec.catch_up,
                overlap=spec.overlap,
                next_tick=cron.after(now),
            )
    except IntegrityError:
        return Schedule.objects.using(using).get(name=spec.name)


def pause(
    name: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> bool:
    """Pause a schedule; False when it was already paused (nothing written)."""
    alias, reason = db_for(using), check_reason(reason)
    spec = spec_of(name)
    with transaction.atomic(using=alias):
        row = row_of(spec, db_now(alias), alias)
        changed = Schedule.objects.using(alias).filter(pk=row.pk, paused=False).update(paused=True)
        if changed:
            _audit("pause", row, by, reason)
    return bool(changed)


def resume(
    name: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> bool:
    """Resume a paused schedule from its next tick after now; False when it was
    not paused (nothing written)."""
    alias, reason = db_for(using), check_reason(reason)
    spec = spec_of(name)
    with transaction.atomic(using=alias):
        now = db_now(alias)
        row = row_of(spec, now, alias)
        changed = (
            Schedule.objects.using(alias)
            .filter(pk=row.pk, paused=True)
            .update(paused=False, next_tick=spec.parsed().after(now), queued_tick=None)
        )
        if changed:
            _audit("resume", row, by, reason)
    return bool(changed)


def trigger(
    name: str, *, reason: str | None = None, by: Any = None, using: str | None = None
) -> WorkflowHandle:
    """Start one run of the schedule now, paused or not; returns its handle."""
    alias, reason = db_for(using), check_reason(reason)
    spec = spec_of(name)
    with transaction.atomic(using=alias):
        now = db_now(alias)
        row = row_of(spec, now, alias)
        run_id = f"schedule:{spec.name}:{iso(now)}"
        workflow, args, kwargs = spec.call()
        handle = start(workflow, *args, workflow_id=run_id, using=using, **kwargs)
        Schedule.objects.using(alias).filter(pk=row.pk).update(last_run_id=run_id)
        _audit("trigger", row, by, reason, detail=f" run {run_id}")
    return handle


def _audit(operation: str, row: Schedule, by: Any, reason: str | None, detail: str = "") -> None:
    name = actor_name(by)
    logger.info(
        "%s schedule %s%s by %s%s",
        DONE[operation],
        row.name,
        detail,
        name,
        f": {reason}" if reason else "",
    )
    user_id = user_id_of(by)
    if user_id is None or not apps.is_installed("django.contrib.admin"):
        return
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.contrib.contenttypes.models import ContentType

    alias = router.db_for_write(LogEntry)
    content_type = ContentType.objects.db_manager(alias).get_for_model(Schedule)
    what = f"{DONE[operation].capitalize()}{detail}"
    LogEntry.objects.using(alias).create(
        user_id=user_id,
        content_type_id=content_type.pk,
        object_id=str(row.pk),
        object_repr=str(row)[:200],
        action_flag=CHANGE,
        change_message=f"{what}. Reason: {reason}" if reason else f"{what} (no reason given).",
    )
