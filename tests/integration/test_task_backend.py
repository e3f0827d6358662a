"""Django's Tasks API on weft (docs/tasks.md): ``@task`` runs executed by real
``weft_worker`` processes, with results, retries, delays and queues.

Django >= 6.0 only (django.tasks is new there); skipped with a reason on 5.2.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import django
import pytest
from django.db import transaction
from django.utils import timezone

import weft_django as weft
from example_project.orders.models import StepLog
from weft_django.models import RunStatus, WorkflowRun

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_tasks,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(django.VERSION < (6, 0), reason="django.tasks is new in Django 6.0"),
]

if django.VERSION >= (6, 0):
    from django.tasks import TaskResultStatus

    from example_project.orders import background

FAST_RETRY = {"WEFT_TASK_RETRY_INTERVAL": "0.1"}


def _finished(result: Any) -> Any:
    result.refresh()
    return result if result.is_finished else None


def test_enqueued_task_runs_once_on_a_worker_with_its_result(workers, wait) -> None:
    result = background.send_receipt.enqueue(7, "ada@example.com")
    assert result.status == TaskResultStatus.READY
    assert WorkflowRun.objects.get(pk=result.id).workflow_name == "django.tasks.default"
    workers.start(**FAST_RETRY)
    wait(lambda: _finished(result), 30, what="the task to finish")
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"order_id": 7, "sent_to": "ada@example.com"}
    assert result.errors == [] and result.attempts == 1
    assert result.started_at is not None and result.finished_at >= result.started_at
    assert StepLog.objects.filter(run_id="receipt-7").count() == 1
    fetched = background.send_receipt.get_result(result.id)
    assert fetched.args == [7, "ada@example.com"] and fetched.return_value == result.return_value


def test_enqueue_commits_with_the_callers_transaction(workers, wait) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = background.send_receipt.enqueue(1, "gone@example.com")
        assert WorkflowRun.objects.filter(pk=rolled_back.id).exists()  # same transaction
        raise RuntimeError("the view failed")
    assert not WorkflowRun.objects.filter(pk=rolled_back.id).exists()
    with transaction.atomic():
        kept = background.send_receipt.enqueue(2, "kept@example.com")
    workers.start(**FAST_RETRY)
    wait(lambda: _finished(kept), 30, what="the committed task to finish")
    assert kept.status == TaskResultStatus.SUCCESSFUL
    assert not StepLog.objects.filter(run_id="receipt-1").exists()


def test_run_after_delays_the_start(workers, wait) -> None:
    workers.start(**FAST_RETRY)
    run_after = timezone.now() + timedelta(seconds=3)
    result = background.send_receipt.using(run_after=run_after).enqueue(3, "later@example.com")
    wait(lambda: _finished(result), 30, what="the delayed task to finish")
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.started_at >= run_after


def test_failed_attempts_are_retried_by_the_retry_policy(workers, wait) -> None:
    result = background.flaky_export.enqueue(2)  # fails twice; RETRY allows 3 attempts
    workers.start(**FAST_RETRY)
    wait(lambda: _finished(result), 30, what="the flaky task to finish")
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    assert result.return_value == 3
    assert result.attempts == 3
    assert [e.exception_class_path for e in result.errors] == ["builtins.ConnectionError"] * 2
    assert "export service down (attempt 1)" in result.errors[0].traceback
    assert list(StepLog.objects.filter(run_id="flaky").values_list("step", flat=True)) == [
        "attempt-1",
        "attempt-2",
        "attempt-3",
    ]


def test_a_task_that_keeps_failing_is_failed_with_its_errors(workers, wait) -> None:
    result = background.always_fails.enqueue("no such customer")
    workers.start(**FAST_RETRY)
    wait(lambda: _finished(result), 30, what="the failing task to give up")
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 3
    assert result.errors[-1].exception_class is ValueError
    assert "no such customer" in result.errors[-1].traceback
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018
    assert WorkflowRun.objects.get(pk=result.id).status == RunStatus.FAILED


def test_async_task(workers, wait) -> None:
    result = background.total.enqueue([1, 2, 3])
    workers.start(**FAST_RETRY)
    wait(lambda: _finished(result), 30, what="the async task to finish")
    assert result.return_value == 6


def test_workers_serve_the_queues_they_are_given(workers, wait) -> None:
    newsletter = background.send_newsletter.enqueue(12)
    receipt = background.send_receipt.enqueue(4, "q@example.com")
    workers.start("default-only", args=["--task-queue", "default"], **FAST_RETRY)
    wait(lambda: _finished(receipt), 30, what="the default-queue task")
    newsletter.refresh()
    assert newsletter.status == TaskResultStatus.READY  # nobody serves "emails" yet
    workers.start("emails", args=["--task-queue", "emails"], **FAST_RETRY)
    wait(lambda: _finished(newsletter), 30, what="the emails-queue task")
    assert newsletter.return_value == 12


def test_a_run_naming_a_non_task_is_refused_and_nothing_runs(workers, wait) -> None:
    """Only @task objects of installed apps are ever called (the allow-list)."""
    forged = [
        weft.start("django.tasks.default", "os.system", "default", ["touch /tmp/x"], {}).id,
        weft.start(
            "django.tasks.default",
            "example_project.orders.workflows.reserve_stock",  # a function, not a @task
            "default",
            [1],
            {},
        ).id,
    ]
    workers.start(**FAST_RETRY)

    def failed() -> bool:
        return WorkflowRun.objects.filter(pk__in=forged, status=RunStatus.FAILED).count() == 2

    wait(failed, 30, what="the forged runs to fail")
    for run_id in forged:
        error = WorkflowRun.objects.get(pk=run_id).error
        assert error["type"] == "TaskNotAllowedError", error
    assert not StepLog.objects.exists()
