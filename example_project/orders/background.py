"""Background work with Django's standard Tasks API (Django >= 6.0), run durably by weft.

``settings.TASKS`` points at ``weft_django.backends.WeftTaskBackend``: each
``.enqueue()`` stores a run in the caller's transaction, and a
``manage.py weft_worker`` executes it under a fenced claim (docs/tasks.md).
Named ``background`` rather than ``tasks``: Celery autodiscovers ``tasks``
modules.
"""

from __future__ import annotations

import asyncio

from django.tasks import TaskContext, task

from .models import StepLog


@task
def send_receipt(order_id: int, email: str) -> dict:
    """A plain task: its return value is stored (JSON) and read by get_result()."""
    StepLog.objects.create(run_id=f"receipt-{order_id}", step="send_receipt")
    return {"order_id": order_id, "sent_to": email}


@task(queue_name="emails")
def send_newsletter(issue: int) -> int:
    """On the ``emails`` queue: a worker started with ``--task-queue emails`` runs it."""
    StepLog.objects.create(run_id=f"newsletter-{issue}", step="send_newsletter")
    return issue


@task(takes_context=True)
def flaky_export(context: TaskContext, fail_times: int) -> int:
    """Fails its first ``fail_times`` attempts; the backend's RetryPolicy retries it."""
    StepLog.objects.create(run_id="flaky", step=f"attempt-{context.attempt}")
    if context.attempt <= fail_times:
        raise ConnectionError(f"export service down (attempt {context.attempt})")
    return context.attempt


@task
async def total(values: list[int]) -> int:
    """An async task: the worker runs the coroutine to completion."""
    await asyncio.sleep(0)
    return sum(values)


@task
def always_fails(message: str) -> None:
    raise ValueError(message)
