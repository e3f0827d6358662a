"""A no-op ``@task`` (Django >= 6.0): what bench/start_cost.py enqueues and runs."""

from django.tasks import task


@task
def noop() -> None:
    return None
