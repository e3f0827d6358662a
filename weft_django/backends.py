"""A backend for Django's Tasks API (Django >= 6.0): durable, fenced task runs.

``TASKS = {"default": {"BACKEND": "weft_django.backends.WeftTaskBackend"}}``
turns every enqueued ``@task`` into a run of the built-in workflow
``django.tasks.<queue name>``, stored in the same database transaction as the
caller's (a rollback leaves no run) and executed by ``weft_worker`` under the
ownership protocol. Each attempt is a checkpointed step, so a task that
succeeded is never run again after a worker crash; a failed attempt is
retried after a durable timer, by the backend's ``RetryPolicy``
(docs/tasks.md).

Security: a run names its task by module path. The worker imports that path
only when its module belongs to an installed app, and runs it only when it
is a ``django.tasks.Task`` of this backend with that exact path; anything
else fails the run with :class:`TaskNotAllowedError` and nothing is called.
A schedule of a task (``@weft.schedule`` above ``@task``, or a
``WEFT["SCHEDULES"]`` entry's ``"task"``) is checked by the same rule
(:func:`scheduled_task`, system check weft.E034) and stores the same run.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from importlib import import_module
from traceback import format_exception
from typing import Any

from django.apps import apps
from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus, task_backends
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTaskBackend, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from . import api
from .checks.extras import backend_problem, task_backend_aliases
from .exceptions import WeftError
from .flow.settings import DEFAULT_QUEUE, queues
from .models import RunStatus, WorkflowEvent, WorkflowRun, db_for
from .runtime import registry
from .runtime.backoff import is_transient
from .runtime.context import Context
from .runtime.policy import RetryPolicy
from .schedules.declare import set_task_resolver

WORKFLOW_PREFIX = "django.tasks."
ATTEMPT_PREFIX = "attempt-"
_MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")

STATUSES = {
    RunStatus.PENDING: TaskResultStatus.READY,
    RunStatus.RUNNING: TaskResultStatus.RUNNING,
    RunStatus.WAITING: TaskResultStatus.RUNNING,  # between attempts (a retry timer)
    RunStatus.SUSPENDED: TaskResultStatus.RUNNING,  # blocked; an operator resumes it
    RunStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    RunStatus.FAILED: TaskResultStatus.FAILED,
    RunStatus.CANCELLED: TaskResultStatus.FAILED,
    RunStatus.TIMED_OUT: TaskResultStatus.FAILED,
}


class TaskNotAllowedError(WeftError):
    """A run names something that is not a registered ``@task`` of this backend."""


class TaskFailedError(WeftError):
    """A task's last attempt raised; the run fails with this (errors: ``get_result``)."""


def flow_queue(queue_name: str) -> str:
    """The flow-control queue of a task's ``queue_name``: the ``WEFT["QUEUES"]``
    queue of that name, with its limits, else ``"default"`` (docs/flow-control.md)."""
    return queue_name if queue_name in queues() else DEFAULT_QUEUE


def workflow_name(queue: str) -> str:
    return f"{WORKFLOW_PREFIX}{queue}"


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _class_path(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


class WeftTaskBackend(BaseTaskBackend):
    """Django's Tasks API on weft: ``OPTIONS`` takes ``RETRY`` (a
    :class:`~weft_django.RetryPolicy` or its keyword arguments; default: one
    attempt) and ``DATABASE`` (the alias weft's tables live on)."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True  # -100..100, higher first (docs/flow-control.md)

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        # A bad entry never raises here: Django's own system check creates every
        # backend, so raising would crash `manage.py check` (and AppConfig.ready())
        # before weft.E015 could say what is wrong. The backend is made with no
        # queues and no options instead, and refuses to be used (InvalidTaskBackend).
        self.problem: str | None = backend_problem(params)
        super().__init__(alias, {"QUEUES": [], "OPTIONS": {}} if self.problem else params)
        retry = self.options.get("RETRY")
        if isinstance(retry, Mapping):
            retry = RetryPolicy(**retry)
        self.retry_policy: RetryPolicy = retry or RetryPolicy(max_attempts=1)
        self.using: str | None = self.options.get("DATABASE")

    def _usable(self) -> None:
        if self.problem:
            raise InvalidTaskBackend(
                f"TASKS[{self.alias!r}]: {self.problem} (system check weft.E015)"
            )

    # -- enqueue ----------------------------------------------------------------

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Store a run in the caller's transaction (if any); returns a READY result.

        One statement (``weft.start``'s), nothing read back: the result's
        ``enqueued_at`` is this process's clock (the run's ``created_at``, which
        :meth:`get_result` reports, is the database's)."""
        self._usable()
        self.validate_task(task)
        handle = api.start(
            workflow_name(task.queue_name),
            task.module_path,
            self.alias,
            list(args),
            dict(kwargs),
            start_at=task.run_after,
            using=self.using,
            queue=flow_queue(task.queue_name),
            priority=task.priority,
        )
        result = self._ready(task, handle.id, args, kwargs)
        task_enqueued.send(type(self), task_result=result)
        return result

    def enqueue_many(
        self, task: Task, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]]
    ) -> list[TaskResult]:
        """Enqueue ``task`` once per ``(args, kwargs)`` of ``calls``, in one
        statement per 1,000 runs with one wake-up (``weft.start_many``); returns
        their READY results in order. Django's Tasks API has no bulk enqueue:
        call it on the backend (``task.get_backend().enqueue_many(task, calls)``).
        An argument that is not JSON raises ``StartManyError``, nothing stored."""
        self._usable()
        self.validate_task(task)
        name = workflow_name(task.queue_name)
        pairs = [(list(args), dict(kwargs)) for args, kwargs in calls]
        requests = [
            api.StartRequest(
                name,
                (task.module_path, self.alias, args, kwargs),
                start_at=task.run_after,
                queue=flow_queue(task.queue_name),
                priority=task.priority,
            )
            for args, kwargs in pairs
        ]
        outcomes = api.start_many(requests, using=self.using)
        results = []
        for (args, kwargs), outcome in zip(pairs, outcomes, strict=True):
            if isinstance(outcome, Exception):  # random ids: never, but never silently
                raise outcome
            results.append(self._ready(task, outcome.id, args, kwargs))
        for result in results:
            task_enqueued.send(type(self), task_result=result)
        return results

    def _ready(self, task: Task, run_id: str, args: Any, kwargs: Any) -> TaskResult:
        """The result of a run just enqueued: everything in it is known, built
        from what was written, not read."""
        result: TaskResult = TaskResult(
            task=task,
            id=run_id,
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        return result

    # -- results ------------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult:
        """The :class:`TaskResult` of the run ``result_id``, read now.

        Statuses map as: ``pending`` READY; ``running``, ``waiting`` (between
        attempts) and ``suspended`` RUNNING; ``completed`` SUCCESSFUL (with its
        return value); ``failed``, ``cancelled`` and ``timed_out`` FAILED. Each
        failed attempt is an entry of ``errors``, and ``worker_ids`` names the
        engine of each attempt. ``TaskResultDoesNotExist`` when there is no such
        run or it was not enqueued through this backend; ``InvalidTaskBackend``
        when the backend's configuration is unusable (system check weft.E015).
        """
        self._usable()
        alias = db_for(self.using)
        run = (
            WorkflowRun.objects.using(alias)
            .filter(pk=result_id, workflow_name__startswith=WORKFLOW_PREFIX)
            .only("status", "args", "result", "created_at", "started_at", "finished_at")
            .first()
        )
        if run is None or len(run.args) != 4 or run.args[1] != self.alias:
            raise TaskResultDoesNotExist(result_id)
        module_path, _alias, args, kwargs = run.args
        attempts = list(
            WorkflowEvent.objects.using(alias)
            .filter(run_id=result_id, kind="step", name__startswith=ATTEMPT_PREFIX)
            .order_by("seq")
            .values_list("result", "engine_id", "created_at")
        )
        errors = [
            TaskError(**outcome["error"])
            for outcome, _engine, _at in attempts
            if isinstance(outcome, dict) and "error" in outcome
        ]
        status = STATUSES[RunStatus(run.status)]
        result: TaskResult = TaskResult(
            task=self.resolve(module_path),
            id=result_id,
            status=status,
            enqueued_at=run.created_at,
            started_at=run.started_at,
            finished_at=run.finished_at,
            last_attempted_at=attempts[-1][2] if attempts else run.started_at,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=errors,
            worker_ids=[
                engine or (outcome or {}).get("worker", "") for outcome, engine, _at in attempts
            ],
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", run.result)
        elif status == TaskResultStatus.FAILED and not errors:
            # cancelled, timed out, or refused before any attempt (e.g. not allowed)
            error = WorkflowRun.objects.using(alias).values_list("error", flat=True).get(pk=run.pk)
            error = error if isinstance(error, dict) else {}
            kind = {
                "TaskNotAllowedError": "weft_django.backends.TaskNotAllowedError",
                "TaskFailedError": "weft_django.backends.TaskFailedError",
            }.get(str(error.get("type")), "weft_django.exceptions.WorkflowFailedError")
            if run.status == RunStatus.CANCELLED:
                kind = "weft_django.exceptions.WorkflowCancelledError"
            result.errors.append(
                TaskError(
                    exception_class_path=kind,
                    traceback=str(error.get("traceback") or error.get("message") or run.status),
                )
            )
        return result

    # -- the allow-list -------------------------------------------------------------

    def resolve(self, module_path: Any) -> Task:
        """The ``@task`` of this backend at ``module_path``, or TaskNotAllowedError.

        Imports only modules of installed apps, never an arbitrary input path.
        """
        self._usable()
        found = import_task(module_path)
        if found.backend != self.alias:
            raise TaskNotAllowedError(
                f"{module_path!r} belongs to task backend {found.backend!r}, not {self.alias!r}"
            )
        return found


def import_task(module_path: Any) -> Task:
    """The ``django.tasks`` ``@task`` at ``module_path`` of an installed app
    (TaskNotAllowedError otherwise; nothing outside installed apps is imported)."""
    if not isinstance(module_path, str) or not _MODULE_PATH.match(module_path):
        raise TaskNotAllowedError(f"{module_path!r} is not a task's module path")
    module_name, _, attribute = module_path.rpartition(".")
    if not any(
        module_name == app.name or module_name.startswith(f"{app.name}.")
        for app in apps.get_app_configs()
    ):
        raise TaskNotAllowedError(
            f"{module_path!r} is not in an installed app; weft runs only the @task "
            "functions of installed apps"
        )
    try:
        found = getattr(import_module(module_name), attribute, None)
    except ImportError as exc:
        raise TaskNotAllowedError(f"{module_path!r} cannot be imported: {exc}") from exc
    if not isinstance(found, Task) or found.module_path != module_path:
        raise TaskNotAllowedError(f"{module_path!r} is not a django.tasks @task")
    return found


def scheduled_task(task: Task | str) -> Task:
    """The task a schedule fires (``WEFT["SCHEDULES"]`` names it by module path),
    checked as a worker checks an enqueued one: a task of a usable
    ``WeftTaskBackend`` that its :meth:`~WeftTaskBackend.resolve` allows, whose
    runs are stored on the database schedules fire on. TaskNotAllowedError
    otherwise (system check weft.E034)."""
    if not isinstance(task, Task):
        task = import_task(task)
    try:
        backend = task_backends[task.backend]
    except InvalidTaskBackend as exc:
        raise TaskNotAllowedError(f"{task.module_path!r}: {exc}") from None
    if not isinstance(backend, WeftTaskBackend):
        raise TaskNotAllowedError(
            f"{task.module_path!r} belongs to task backend {task.backend!r}, a "
            f"{type(backend).__name__}; weft schedules only tasks of a WeftTaskBackend"
        )
    try:
        backend.resolve(task.module_path)
    except InvalidTaskBackend as exc:
        raise TaskNotAllowedError(str(exc)) from None
    if db_for(backend.using) != db_for(None):
        raise TaskNotAllowedError(
            f"{task.module_path!r}: task backend {task.backend!r} stores its runs on "
            f"database {db_for(backend.using)!r}, but schedules fire on {db_for(None)!r}"
        )
    return task


def task_route(module_path: str) -> tuple[str, str, str]:
    """(module path, backend alias, queue) of the task a ``WEFT["SCHEDULES"]``
    entry names (``"task": "<module path>"``), by :func:`scheduled_task`."""
    task = scheduled_task(module_path)
    return task.module_path, task.backend, task.queue_name


def register_configured() -> None:
    """Create each configured WeftTaskBackend, registering its queues' workflows
    (none for an entry with a mistake: system check weft.E015 reports it), and
    let ``WEFT["SCHEDULES"]`` name tasks (resolved by :func:`task_route`)."""
    set_task_resolver(task_route)
    for alias in task_backend_aliases():
        backend = task_backends[alias]
        if not isinstance(backend, WeftTaskBackend) or backend.problem:
            continue
        for queue in sorted(backend.queues):
            register_queue(queue)


def serve_only(queues: list[str]) -> None:
    """A worker that serves only ``queues``: forget the other queues' workflows."""
    for name in registry.registered_names():
        if name.startswith(WORKFLOW_PREFIX) and name[len(WORKFLOW_PREFIX) :] not in queues:
            registry.unregister(name)


def register_queue(queue: str) -> None:
    registry.register(registry.WorkflowDefinition(name=workflow_name(queue), version=1, fn=execute))


# -- what a worker runs ------------------------------------------------------------


def execute(ctx: Context, module_path: str, alias: str, args: list[Any], kwargs: dict) -> Any:
    """The built-in workflow: one checkpointed step per attempt, durable waits
    between. A run that succeeds at once is one statement for the worker after
    its claim: the attempt's event, the result, the finish and the release."""
    backend = task_backends[alias]
    if not isinstance(backend, WeftTaskBackend):
        raise TaskNotAllowedError(f"task backend {alias!r} is not a WeftTaskBackend")
    task = backend.resolve(module_path)
    policy = backend.retry_policy
    attempt = 0
    while True:
        attempt += 1
        # The turn ends right after the attempt (a return, a TaskFailedError or a
        # sleep before the next): its checkpoint goes out with that write.
        outcome = ctx._last_step(
            _attempt,
            backend,
            task,
            ctx.workflow_id,
            args,
            kwargs,
            attempt,
            name=f"{ATTEMPT_PREFIX}{attempt}",
        )
        if "error" not in outcome:
            return outcome["value"]
        if not outcome["retryable"] or attempt >= policy.max_attempts:
            raise TaskFailedError(
                f"{module_path} failed after {attempt} attempt(s): "
                f"{outcome['error']['exception_class_path']}"
            )
        ctx.sleep(policy.interval(attempt))


def _attempt(
    backend: WeftTaskBackend, task: Task, run_id: str, args: list[Any], kwargs: dict, attempt: int
) -> dict[str, Any]:
    """Call the task once; its outcome (value or error) is what the step records."""
    worker = _worker_id()
    result: TaskResult = TaskResult(
        task=task,
        id=run_id,
        status=TaskResultStatus.RUNNING,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=args,
        kwargs=kwargs,
        backend=backend.alias,
        errors=[],
        worker_ids=[worker] * attempt,
    )
    task_started.send(type(backend), task_result=result)
    outcome: dict[str, Any] = {"worker": worker}
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
    except Exception as exc:
        if is_transient(exc):
            raise  # the database failed under the task: the turn is retried, not the task
        outcome["error"] = _task_error(exc)
        outcome["retryable"] = not isinstance(exc, backend.retry_policy.non_retryable)
    else:
        try:
            outcome["value"] = normalize_json(value)
        except (TypeError, ValueError) as exc:  # not JSON: a programming error, not retried
            outcome["error"] = _task_error(exc)
            outcome["retryable"] = False
    object.__setattr__(
        result,
        "status",
        TaskResultStatus.FAILED if "error" in outcome else TaskResultStatus.SUCCESSFUL,
    )
    task_finished.send(type(backend), task_result=result)
    return outcome


def _task_error(exc: BaseException) -> dict[str, str]:
    return {
        "exception_class_path": _class_path(exc),
        "traceback": "".join(format_exception(exc))[-8000:],
    }
