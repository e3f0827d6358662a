"""Extras and the task backend's configuration: system checks weft.E013-E015,
bad input to the django.tasks backend (a typed error, nothing stored), and
``weft_worker --task-queue``."""

from __future__ import annotations

import django
import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from weft_django import extras
from weft_django.exceptions import PayloadError
from weft_django.models import WorkflowRun

needs_tasks = pytest.mark.skipif(
    django.VERSION < (6, 0), reason="django.tasks is new in Django 6.0"
)
WEFT_BACKEND = {"BACKEND": "weft_django.backends.WeftTaskBackend"}


def ids(messages: list) -> list[str]:
    return [message.id for message in messages]


def test_postgres_with_notify_needs_psycopg3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extras, "postgres_aliases", lambda: ["default"])
    assert extras.check_postgres_driver() == []  # psycopg 3 is installed here
    monkeypatch.setattr(extras, "installed", lambda module: module != "psycopg")
    [error] = extras.check_postgres_driver()
    assert error.id == "weft.E013" and "weft-django[postgres]" in error.hint
    with override_settings(WEFT={"NOTIFY": False}):
        assert extras.check_postgres_driver() == []  # polling needs no psycopg


def test_without_postgresql_psycopg_is_not_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extras, "postgres_aliases", lambda: [])  # SQLite or MariaDB only
    monkeypatch.setattr(extras, "installed", lambda module: False)
    assert extras.check_postgres_driver() == []


def test_task_backend_without_django_tasks_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with override_settings(TASKS={"default": WEFT_BACKEND}):
        monkeypatch.setattr(extras, "has_django_tasks", lambda: False)
        [error] = extras.check_task_backend()
        assert error.id == "weft.E014" and "Django 6.0" in error.msg


@needs_tasks
@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"QUEUES": []}, "an empty list"),
        ({"QUEUES": ["ok", "bad queue!"]}, "queue names must match"),
        ({"OPTIONS": {"RETRY": 3}}, "must be a weft_django.RetryPolicy or a dict"),
        ({"OPTIONS": {"RETRY": {"attempts": 3}}}, "OPTIONS['RETRY']"),
        ({"OPTIONS": {"PRIORITY": True}}, "unknown OPTIONS"),
    ],
)
def test_bad_task_backend_settings_are_e015(params: dict, says: str) -> None:
    with override_settings(TASKS={"default": {**WEFT_BACKEND, **params}}):
        [error] = extras.check_task_backend()
    assert error.id == "weft.E015" and says in error.msg


@needs_tasks
def test_the_example_settings_pass_the_checks() -> None:
    assert extras.check_task_backend() == []


@needs_tasks
def test_priority_is_refused_at_validation() -> None:
    from django.tasks.exceptions import InvalidTask

    from example_project.orders import background

    with pytest.raises(InvalidTask, match="priority"):
        background.send_receipt.using(priority=10)


@needs_tasks
@pytest.mark.django_db
def test_non_json_arguments_store_nothing() -> None:
    from example_project.orders import background

    with pytest.raises(PayloadError):
        background.send_receipt.enqueue(object(), "x@example.com")
    assert not WorkflowRun.objects.exists()


@needs_tasks
@pytest.mark.django_db
def test_get_result_of_an_unknown_id() -> None:
    from django.tasks import default_task_backend
    from django.tasks.exceptions import TaskResultDoesNotExist

    import weft_django as weft
    from tests.workers import tw_steps  # noqa: F401  (registers tw.steps)

    weft.start("tw.steps", workflow_id="not-a-task")
    for result_id in ("nope", "not-a-task"):
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(result_id)


@needs_tasks
def test_the_allow_list_refuses_what_is_not_a_task_of_an_installed_app() -> None:
    from django.tasks import default_task_backend

    from weft_django.backends import TaskNotAllowedError

    for path in (
        "os.system",
        "not a path",
        42,
        "example_project.orders.workflows.reserve_stock",
        "example_project.orders.nosuchmodule.task",
    ):
        with pytest.raises(TaskNotAllowedError):
            default_task_backend.resolve(path)
    task = default_task_backend.resolve("example_project.orders.background.send_receipt")
    assert task.name == "send_receipt"


@needs_tasks
def test_worker_task_queue_must_be_configured() -> None:
    with pytest.raises(CommandError, match="not a queue of the configured"):
        call_command("weft_worker", "--task-queue", "nope", "--once")


@pytest.mark.skipif(django.VERSION >= (6, 0), reason="Django 5.2 has no task backends")
def test_worker_task_queue_needs_a_task_backend() -> None:
    with pytest.raises(CommandError, match="needs a WeftTaskBackend"):
        call_command("weft_worker", "--task-queue", "default", "--once")
