"""Extras and the task backend's configuration: system checks weft.E013-E015,
bad input to the django.tasks backend (a typed error, nothing stored), and
``weft_worker --task-queue``."""

from __future__ import annotations

import django
import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from tests.scratch import Scratch, explained
from weft_django import RetryPolicy
from weft_django.checks import extras
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


# Every field of a WeftTaskBackend entry: (the entry's keys, what the message says).
# backend_problems() is plain Python: these run on every Django version.
BAD_ENTRIES = [
    ({"QUEUE": ["default"]}, "unknown key(s) QUEUE (a TASKS entry of this backend has BACKEND"),
    ({"QUEUES": []}, "an empty list (any queue) is not supported"),
    ({"QUEUES": "emails"}, "QUEUES must be a list of queue names, not 'emails'"),
    ({"QUEUES": None}, "QUEUES must be a list of queue names, not None"),
    ({"QUEUES": 3}, "QUEUES must be a list of queue names, not 3"),
    ({"QUEUES": ["ok", "bad queue!"]}, "queue names must match ^[A-Za-z0-9_.-]{1,200}$"),
    ({"QUEUES": ["ok", 7]}, "not 7"),
    ({"QUEUES": ["x" * 201]}, "at most 200"),
    ({"OPTIONS": ["RETRY"]}, "OPTIONS must be a dict (keys: RETRY, DATABASE), not ['RETRY']"),
    ({"OPTIONS": None}, "OPTIONS must be a dict"),
    ({"OPTIONS": {"PRIORITY": True}}, "unknown OPTIONS PRIORITY (known: RETRY, DATABASE)"),
    ({"OPTIONS": {"RETRY": 3}}, "OPTIONS['RETRY'] must be a weft_django.RetryPolicy or a dict"),
    ({"OPTIONS": {"RETRY": {"attempts": 3}}}, "OPTIONS['RETRY'] has unknown field(s) attempts"),
    (
        {"OPTIONS": {"RETRY": {"max_attempts": 0}}},
        "OPTIONS['RETRY']: max_attempts must be an int of at least 1",
    ),
    ({"OPTIONS": {"RETRY": {"max_attempts": "3"}}}, "max_attempts must be an int of at least 1"),
    ({"OPTIONS": {"RETRY": {"max_attempts": True}}}, "max_attempts must be an int of at least 1"),
    (
        {"OPTIONS": {"RETRY": {"initial_interval": -1}}},
        "OPTIONS['RETRY']: initial_interval must be seconds",
    ),
    ({"OPTIONS": {"RETRY": {"max_interval": "30"}}}, "max_interval must be seconds"),
    ({"OPTIONS": {"RETRY": {"backoff": -2}}}, "backoff must be a finite number of at least 1"),
    (
        {"OPTIONS": {"RETRY": {"initial_interval": 60, "max_interval": 1}}},
        "must be at least initial_interval",
    ),
    ({"OPTIONS": {"RETRY": {"non_retryable": "ValueError"}}}, "non_retryable must be"),
    ({"OPTIONS": {"DATABASE": "replica"}}, "OPTIONS['DATABASE'] must be None (the router's"),
    ({"OPTIONS": {"DATABASE": 0}}, "an alias of DATABASES ('default'), not 0"),
]


@pytest.mark.parametrize(("params", "says"), BAD_ENTRIES)
def test_every_field_of_a_task_backend_entry_is_checked(params: dict, says: str) -> None:
    [problem] = extras.backend_problems({**WEFT_BACKEND, **params})
    assert says in problem
    assert extras.backend_problem({**WEFT_BACKEND, **params}) == problem


def test_every_problem_of_an_entry_is_reported() -> None:
    found = extras.backend_problems(
        {
            **WEFT_BACKEND,
            "QUEUES": "emails",
            "EXTRA": 1,
            "OPTIONS": {"RETRY": {"max_attempts": 0}, "DATABASE": "nope", "X": 1},
        }
    )
    assert len(found) == 5
    for part in ("EXTRA", "QUEUES", "unknown OPTIONS X", "max_attempts", "DATABASE"):
        assert any(part in problem for problem in found), part


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"QUEUES": ["default", "emails.v2"], "OPTIONS": {}},
        {"QUEUES": ("a",), "OPTIONS": {"RETRY": None, "DATABASE": None}},
        {"OPTIONS": {"RETRY": RetryPolicy(max_attempts=5), "DATABASE": "default"}},
        {"OPTIONS": {"RETRY": {"max_attempts": 2, "initial_interval": 0, "backoff": 1.5}}},
    ],
)
def test_valid_task_backend_entries(params: dict) -> None:
    assert extras.backend_problems({**WEFT_BACKEND, **params}) == []


@needs_tasks
@pytest.mark.parametrize(("params", "says"), BAD_ENTRIES)
def test_bad_task_backend_settings_are_e015(params: dict, says: str) -> None:
    with override_settings(TASKS={"default": {**WEFT_BACKEND, **params}}):
        [error] = extras.check_task_backend()
    assert error.id == "weft.E015" and says in error.msg
    assert error.msg.startswith("TASKS['default']: ") and "docs/tasks.md" in error.hint


@needs_tasks
def test_a_bad_entry_makes_a_backend_that_refuses_to_be_used() -> None:
    """Django's own system check creates every task backend: creating one must never
    raise, or `manage.py check` crashes before weft.E015 can be shown."""
    from django.tasks import task_backends
    from django.tasks.exceptions import InvalidTaskBackend

    from example_project.orders import background
    from weft_django.backends import register_configured
    from weft_django.runtime import registry

    bad = {**WEFT_BACKEND, "QUEUES": "emails", "OPTIONS": {"RETRY": {"max_attempts": 0}}}
    with override_settings(TASKS={"default": bad}):
        backend = task_backends["default"]  # no InvalidTaskBackend here
        assert "QUEUES must be a list" in backend.problem
        assert backend.queues == set() and backend.retry_policy.max_attempts == 1
        with pytest.raises(InvalidTaskBackend, match=r"TASKS\['default'\]: QUEUES .*weft\.E015"):
            backend.enqueue(background.send_receipt, (1, "x@example.com"), {})
        with pytest.raises(InvalidTaskBackend):
            backend.get_result("x")
        before = registry.registered_names()
        register_configured()  # registers nothing for it (AppConfig.ready() calls this)
        assert registry.registered_names() == before


@needs_tasks
def test_the_example_settings_pass_the_checks() -> None:
    assert extras.check_task_backend() == []


@needs_tasks
@pytest.mark.django_db
def test_priority_is_stored_on_the_run() -> None:
    from example_project.orders import background

    result = background.send_receipt.using(priority=10).enqueue(1, "x@example.com")
    assert WorkflowRun.objects.get(pk=result.id).priority == 10


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


# -- manage.py, as a process ------------------------------------------------------------

BAD_TASKS = """
TASKS = {
    "default": {
        "BACKEND": "weft_django.backends.WeftTaskBackend",
        "QUEUES": "emails",
        "OPTIONS": {"RETRY": {"max_attempts": 0}},
    }
}
"""


@pytest.mark.integration
def test_manage_py_check_reports_a_bad_tasks_entry_instead_of_crashing(tmp_path) -> None:
    """Issue 24: InvalidTaskBackend raised from AppConfig.ready() crashed every command."""
    project = Scratch(tmp_path, BAD_TASKS)
    check = project.run("check")
    assert check.returncode != 0
    text = explained(check.stderr)
    assert text.startswith("SystemCheckError: System check identified some issues")
    if django.VERSION >= (6, 0):
        assert "(weft.E015) TASKS['default']: QUEUES must be a list of queue names" in text
        assert "(weft.E015) TASKS['default']: OPTIONS['RETRY']: max_attempts must be" in text
    else:
        assert "(weft.E014)" in text  # no django.tasks: the entry cannot be used at all
    for command in (["weft_worker", "--once"], ["migrate", "-v0"]):
        refused = project.run(*command)  # the same report, no traceback: every command
        assert refused.returncode != 0, command
        assert "(weft.E01" in explained(refused.stderr), command
