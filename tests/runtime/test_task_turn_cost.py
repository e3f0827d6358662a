"""What a worker spends on a ``@task`` of the Tasks backend, pinned per database:
the attempt's checkpoint goes out with the turn's last write (the finish, or the
park before a retry), so a task that succeeds at once is one statement after
its claim on PostgreSQL; and the attempt's event is still recorded exactly once,
replayed, never re-run (docs/tasks.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import django
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django.models import RunStatus, WorkflowEvent, WorkflowRun
from weft_django.runtime.engine import TurnOutcome

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(django.VERSION < (6, 0), reason="django.tasks is new in Django 6.0"),
]


def drive(engine: Any, run_id: str) -> tuple[TurnOutcome, list[str]]:
    engine.acquire(run_id)
    with CaptureQueriesContext(connection) as queries:
        outcome = engine.drive(run_id)
    return outcome, [q["sql"] for q in queries.captured_queries]


def test_a_task_that_succeeds_is_one_statement_per_turn(make_engine: Any) -> None:
    from example_project.orders.background import total

    result = total.enqueue([1, 2, 3])
    outcome, sql = drive(make_engine(), result.id)
    assert outcome is TurnOutcome.COMPLETED
    # PostgreSQL: the run was read with its claim; the attempt's event, the
    # result, the finish and the release are one statement. SQLite and
    # MariaDB/MySQL: the turn reads the run and the clock, then the terminal
    # commit is one transaction (savepoint, fence, event, run, release).
    expected = {"postgresql": 2, "sqlite": 9, "mysql": 9}[connection.vendor]
    assert len(sql) == expected, sql
    if connection.vendor == "postgresql":
        assert sql[-1].startswith("WITH rel AS (UPDATE"), sql
    run = WorkflowRun.objects.get(pk=result.id)
    assert (run.status, run.result) == (RunStatus.COMPLETED, 6)
    assert run.started_at is not None and run.finished_at is not None
    (event,) = WorkflowEvent.objects.filter(run_id=result.id)
    assert (event.seq, event.kind, event.name, event.result["value"]) == (0, "step", "attempt-1", 6)
    assert total.get_backend().get_result(result.id).return_value == 6


def test_a_failed_attempt_parks_with_its_checkpoint_and_is_never_re_run(
    make_engine: Any,
) -> None:
    from example_project.orders.background import flaky_export
    from example_project.orders.models import StepLog

    result = flaky_export.enqueue(1)  # the first attempt fails; RETRY allows 3
    engine = make_engine()
    outcome, sql = drive(engine, result.id)
    assert outcome is TurnOutcome.PARKED
    run = WorkflowRun.objects.get(pk=result.id)
    assert run.status == RunStatus.WAITING and run.wake_at is not None
    kinds = list(WorkflowEvent.objects.filter(run_id=result.id).values_list("seq", "kind", "name"))
    assert kinds == [(0, "step", "attempt-1"), (1, "sleep", "")]  # one write: both
    if connection.vendor == "postgresql":
        ours = [s for s in sql if "orders_steplog" not in s]  # not the task's own
        assert len([s for s in ours if not s.startswith("SELECT")]) == 1, sql
    # The retry timer is due: the next turn replays attempt 1 (not re-run) and
    # runs attempt 2, which succeeds and commits with the finish.
    engine.time_offset += timedelta(minutes=5)
    assert drive(engine, result.id)[0] is TurnOutcome.COMPLETED
    assert list(StepLog.objects.filter(run_id="flaky").values_list("step", flat=True)) == [
        "attempt-1",
        "attempt-2",
    ]
    names = WorkflowEvent.objects.filter(run_id=result.id, kind="step").values_list("name")
    assert [name for (name,) in names.order_by("seq")] == ["attempt-1", "attempt-2"]
    assert flaky_export.get_backend().get_result(result.id).return_value == 2


def test_a_task_that_fails_for_good_records_its_attempt_with_the_failure(make_engine: Any) -> None:
    from example_project.orders.background import always_fails

    result = always_fails.enqueue("no such customer")
    engine = make_engine()
    outcome, _ = drive(engine, result.id)
    while outcome is TurnOutcome.PARKED:  # the retries, each after its timer
        engine.time_offset += timedelta(minutes=5)
        outcome, _ = drive(engine, result.id)
    assert outcome is TurnOutcome.FAILED
    found = always_fails.get_backend().get_result(result.id)
    assert [e.exception_class_path for e in found.errors][-1] == "builtins.ValueError"
    attempts = WorkflowEvent.objects.filter(run_id=result.id, kind="step").count()
    assert attempts == len(found.errors) >= 1
