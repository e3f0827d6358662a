"""Schedules of Django Tasks-API tasks (docs/schedules.md, "Scheduling a task"):
``@weft.schedule`` above ``@task`` and ``WEFT["SCHEDULES"]``'s ``"task"``
enqueue the task through weft once per tick (the firing pass in-process, on a
test clock); the system checks of what the backend would not run.

Django >= 6.0 only (django.tasks is new there); skipped with a reason on 5.2,
except the check that says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import django
import pytest
from django.test import override_settings

import weft_django as weft
from example_project.orders.models import StepLog
from tests.conftest import FakeClock
from tests.schedules.test_firing import T0, TIMING, at
from weft_django.checks.schedules import check_schedules
from weft_django.conf import Timing
from weft_django.models import WorkflowRun
from weft_django.schedules.declare import TASK_WORKFLOW, undeclare
from weft_django.schedules.firing import Firer
from weft_django.testing import WorkflowDriver

pytestmark = pytest.mark.django_db

needs_tasks = pytest.mark.skipif(
    django.VERSION < (6, 0), reason="django.tasks is new in Django 6.0"
)

if django.VERSION >= (6, 0):
    from django.tasks import TaskResultStatus, task

    from example_project.orders import background

RECEIPT = "example_project.orders.background.send_receipt"
NEWSLETTER = "example_project.orders.background.send_newsletter"


def plain(n: int) -> int:
    """A module-level function of a module that is not in an installed app."""
    return n


@pytest.fixture
def tclock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def scheduled() -> Iterator[Callable[..., Any]]:
    """``scheduled(task, ...)`` is ``@weft.schedule("* * * * *", ...)`` stacked above
    the ``@task`` (applied to the Task object); forgotten after the test."""
    names: list[str] = []

    def declare(target: Any, cron: str = "* * * * *", **options: Any) -> Any:
        returned = weft.schedule(cron, **options)(target)
        assert returned is target  # still the Task: .enqueue() works as before
        names.append(options.get("name") or target.module_path)
        return target

    yield declare
    for name in names:
        undeclare(name)


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


@needs_tasks
def test_the_task_workflow_is_the_backends() -> None:
    from weft_django.backends import workflow_name

    assert TASK_WORKFLOW.format(queue="emails") == workflow_name("emails")


@needs_tasks
def test_a_scheduled_task_is_enqueued_through_weft_once_per_tick(
    tclock: FakeClock, scheduled: Callable[..., Any]
) -> None:
    scheduled(background.send_receipt, name="receipts", args=(7, "ada@example.com"))
    assert check_schedules() == []
    f = Firer("e1", TIMING, clock=tclock)
    assert f.once().started == []  # synced: the first tick is the next minute
    at(tclock, "2026-01-01T00:01:00.300")
    run_id = "schedule:receipts:2026-01-01T00:01:00Z"
    assert f.once().started == [run_id]
    assert f.once().started == []  # the same tick again: nothing
    run = WorkflowRun.objects.get(pk=run_id)
    # Exactly what WeftTaskBackend.enqueue() stores: a worker resolves the task
    # by its module path through the backend's allow-list.
    assert run.workflow_name == "django.tasks.default"
    assert run.args == [RECEIPT, "default", [7, "ada@example.com"], {}]
    result = background.send_receipt.get_result(run_id)
    assert result.status == TaskResultStatus.READY and result.args == [7, "ada@example.com"]
    with WorkflowDriver() as driver:
        driver.run_until_idle()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"order_id": 7, "sent_to": "ada@example.com"}
    assert StepLog.objects.filter(run_id="receipt-7").count() == 1


@needs_tasks
def test_settings_name_a_task_by_its_module_path(
    tclock: FakeClock, weft_settings: Callable[..., None]
) -> None:
    weft_settings(SCHEDULES={"newsletter": {"task": NEWSLETTER, "cron": "* * * * *", "args": [3]}})
    assert check_schedules() == []
    f = Firer("e1", TIMING, clock=tclock)
    f.once()
    at(tclock, "2026-01-01T00:01:00")
    [run_id] = f.once().started
    run = WorkflowRun.objects.get(pk=run_id)
    assert (run.workflow_name, run.args) == (
        "django.tasks.emails",
        [NEWSLETTER, "default", [3], {}],
    )
    handle = weft.trigger_schedule("newsletter", by="ops")
    assert WorkflowRun.objects.get(pk=handle.id).workflow_name == "django.tasks.emails"
    assert background.send_newsletter.get_result(handle.id).args == [3]


@needs_tasks
@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("os.system", "not in an installed app"),
        ("example_project.orders.workflows.reserve_stock", "is not a django.tasks @task"),
        ("example_project.orders.background.nope", "is not a django.tasks @task"),
        ("not a path", "is not a task's module path"),
    ],
)
def test_a_settings_task_the_backend_would_not_run_is_e034(
    weft_settings: Callable[..., None], path: str, says: str
) -> None:
    weft_settings(SCHEDULES={"bad": {"task": path, "cron": "* * * * *"}})
    [error] = check_schedules()
    assert error.id == "weft.E034" and says in error.msg, error.msg


@needs_tasks
def test_tasks_the_backend_would_not_run_are_e034(scheduled: Callable[..., Any]) -> None:
    # Not in an installed app: the worker would refuse it (TaskNotAllowedError).
    scheduled(task(plain), name="outside")
    [error] = check_schedules()
    assert error.id == "weft.E034" and "not in an installed app" in error.msg
    undeclare("outside")
    # A task of another backend.
    immediate = {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}
    with override_settings(TASKS={**django.conf.settings.TASKS, "immediate": immediate}):
        scheduled(background.send_receipt.using(backend="immediate"), name="other", args=(1, "x"))
        [error] = check_schedules()
    assert error.id == "weft.E034" and "ImmediateBackend" in error.msg


@needs_tasks
def test_bad_task_declarations_are_system_check_errors(
    scheduled: Callable[..., Any], weft_settings: Callable[..., None]
) -> None:
    scheduled(background.send_receipt, name="no-email", args=(1,))
    [error] = check_schedules()
    assert error.id == "weft.E033" and "send_receipt" in error.msg
    undeclare("no-email")
    # @weft.schedule below @task schedules the bare function: not a workflow.
    weft.schedule("* * * * *", name="below")(plain)
    try:
        [error] = check_schedules()
        assert error.id == "weft.E032" and "above @task" in error.hint
    finally:
        undeclare("below")
    weft_settings(SCHEDULES={"both": {"task": RECEIPT, "workflow": "ts.tick", "cron": "* * * * *"}})
    [error] = check_schedules()
    assert error.id == "weft.E031" and "not both" in error.msg


@needs_tasks
def test_a_worker_serving_other_task_queues_leaves_the_schedules_to_others(
    scheduled: Callable[..., Any],
) -> None:
    from weft_django.backends import register_configured, serve_only
    from weft_django.worker.schedule_thread import schedule_loop

    scheduled(background.send_receipt, name="receipts", args=(7, "ada@example.com"))
    stop = threading.Event()
    assert schedule_loop("e1", Timing(30.0, 5.0), stop) is not None
    serve_only(["emails"])  # weft_worker --task-queue emails
    try:
        assert schedule_loop("e1", Timing(30.0, 5.0), stop) is None
    finally:
        register_configured()


@pytest.mark.skipif(django.VERSION >= (6, 0), reason="Django 6 has django.tasks")
def test_a_settings_task_needs_django_6(weft_settings: Callable[..., None]) -> None:
    weft_settings(SCHEDULES={"old": {"task": RECEIPT, "cron": "* * * * *"}})
    [error] = check_schedules()
    assert error.id == "weft.E034" and "Django 6.0" in error.msg
