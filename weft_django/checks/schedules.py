"""System checks of the cron schedules (docs/schedules.md): ``weft.E030`` a bad
declaration (cron expression, time zone, catch-up or overlap policy,
``max_catch_up``, name), ``weft.E031`` a malformed ``WEFT["SCHEDULES"]``
(not a dict, an unknown or missing key, a name declared twice),
``weft.E032`` a workflow that is not registered, ``weft.E033`` arguments the
workflow (or task) cannot take, ``weft.E034`` a ``django.tasks`` task that
``WeftTaskBackend`` would not run. Like every system check error, each stops
``weft_worker`` (and ``migrate``) from starting."""

from __future__ import annotations

import inspect
from typing import Any

from django.core import checks

from ..exceptions import WeftConfigurationError, WeftError, WorkflowArgumentsError
from ..runtime import registry
from ..schedules import declare
from . import extras

HINTS = {
    declare.BAD_DECLARATION: "Cron has five fields (or six, seconds first), e.g. "
    "'*/5 * * * *'; a time zone is an IANA name such as 'Europe/Berlin'; catch_up is "
    "skip, latest or all; overlap is allow, skip or queue (docs/schedules.md).",
    declare.BAD_SETTING: "WEFT['SCHEDULES'] = {'name': {'workflow': 'registered.name', "
    "'cron': '0 * * * *'}} (docs/schedules.md).",
    declare.UNKNOWN_WORKFLOW: "Name the workflow by its registered name (@weft.workflow"
    "(name=...)), defined in an installed app's workflows module; a dotted import path "
    "is never imported. On a django.tasks task, put @weft.schedule above @task.",
    declare.BAD_ARGUMENTS: "Give the schedule args and kwargs that the workflow's "
    "function takes (after ctx), or the task's function (after context).",
    declare.BAD_TASK: "A scheduled task is a module-level @task of an installed app, "
    "of a WeftTaskBackend in TASKS (Django >= 6.0) whose DATABASE is weft's; in "
    "WEFT['SCHEDULES'] name it by its module path (docs/schedules.md).",
}


def _error(check_id: str, msg: str) -> checks.CheckMessage:
    return checks.Error(msg, hint=HINTS[check_id], id=check_id)


@checks.register("weft")
def check_schedules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found = [_error(declare.BAD_DECLARATION, text) for text in declare.code_problems()]
    _, problems = declare.settings_specs()
    found += [_error(check_id, text) for check_id, text in problems]
    if found:
        return found
    try:
        specs = declare.declared()
    except WeftConfigurationError as exc:
        return [_error(declare.BAD_SETTING, str(exc))]
    for name, spec in specs.items():
        if spec.task is not None:
            found += _task_problems(name, spec)
            continue
        workflow = spec.workflow_name
        if not registry.is_registered(workflow):
            found.append(
                _error(
                    declare.UNKNOWN_WORKFLOW,
                    f"Schedule {name!r} fires workflow {workflow!r}, which is not registered.",
                )
            )
            continue
        try:
            registry.get(workflow).check_arguments(spec.args, spec.kwargs)
        except WorkflowArgumentsError as exc:
            found.append(_error(declare.BAD_ARGUMENTS, f"Schedule {name!r}: {exc}"))
    return found


def _task_problems(name: str, spec: declare.ScheduleSpec) -> list[checks.CheckMessage]:
    """A task's schedule: the task as the backend would resolve it, its arguments."""
    if not extras.has_django_tasks():
        return [
            _error(
                declare.BAD_TASK,
                f"Schedule {name!r} fires task {spec.task!r}, but django.tasks is new in "
                "Django 6.0.",
            )
        ]
    from ..backends import scheduled_task

    try:
        task = scheduled_task(spec.task)
    except WeftError as exc:
        return [
            _error(declare.BAD_TASK, f"Schedule {name!r} fires a task weft will not run: {exc}")
        ]
    leading = [None] if task.takes_context else []
    try:
        inspect.signature(task.func).bind(*leading, *spec.args, **spec.kwargs)
    except TypeError as exc:
        return [
            _error(
                declare.BAD_ARGUMENTS,
                f"Schedule {name!r}: task {task.module_path!r} cannot take args "
                f"{list(spec.args)!r} and kwargs {spec.kwargs!r}: {exc}",
            )
        ]
    return []
