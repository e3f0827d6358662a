"""The terminal commit: one statement on PostgreSQL, a transaction elsewhere;
either way it is fenced, releases the claim, and wakes the parent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import weft_django as weft
from weft_django.models import Claim, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership.clock import db_now
from weft_django.runtime.engine import TurnOutcome

from .conftest import expire_lease


@pytest.mark.django_db
def test_a_deposed_engine_cannot_commit_the_end_of_a_run(make_engine: Callable[..., Any]) -> None:
    a, b = make_engine(), make_engine()
    weft.start("tests.echo", 1, workflow_id="fin-1")
    assert a.acquire("fin-1").epoch == 1
    expire_lease(a)
    assert b.acquire("fin-1").epoch == 2
    assert a.drive("fin-1") is TurnOutcome.DEPOSED  # echo returns at once: the finish
    run = WorkflowRun.objects.get(pk="fin-1")
    assert run.status == RunStatus.PENDING and run.result is None
    assert not WorkflowEvent.objects.filter(run_id="fin-1").exists()
    assert Claim.objects.get(pk="fin-1").holder_id == b.engine_id
    Claim.objects.filter(pk="fin-1").update(released_at=db_now())  # a stale stamp
    assert b.drive("fin-1") is TurnOutcome.COMPLETED
    claim = Claim.objects.get(pk="fin-1")
    # Released by the end of the run: not stamped for the ownerless sweep.
    assert (claim.holder_id, claim.epoch, claim.released_at) == (None, 2, None)
    finished = WorkflowRun.objects.get(pk="fin-1")
    assert finished.status == RunStatus.COMPLETED
    assert finished.finished_at is not None and finished.started_at is not None
    assert finished.result == {"args": [1], "kwargs": {}}


@pytest.mark.django_db
def test_the_end_of_a_child_wakes_its_parent_in_the_same_commit(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    WorkflowRun.objects.create(id="fin-parent", workflow_name="tests.echo", status="waiting")
    weft.start("tests.echo", workflow_id="fin-child")
    WorkflowRun.objects.filter(pk="fin-child").update(parent_id="fin-parent")
    engine.acquire("fin-child")
    assert engine.drive("fin-child") is TurnOutcome.COMPLETED
    assert WorkflowRun.objects.get(pk="fin-parent").wake_hint_at is not None


def _noop(i: int) -> int:
    return i


@weft.workflow(name="tests.finish.steps")
def many_steps(ctx: weft.Context, count: int) -> int:
    for i in range(count):
        ctx.step(_noop, i)
    return count


@pytest.mark.django_db
def test_each_step_checkpoint_is_one_statement(make_engine: Callable[..., Any]) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    engine = make_engine()
    counts = {}
    for count in (10, 20):
        weft.start("tests.finish.steps", count, workflow_id=f"fin-steps-{count}")
        engine.acquire(f"fin-steps-{count}")
        with CaptureQueriesContext(connection) as queries:
            assert engine.drive(f"fin-steps-{count}") is TurnOutcome.COMPLETED
        counts[count] = len(queries)
    assert counts[20] - counts[10] == 10
    sql = [q["sql"][:60] for q in queries.captured_queries]
    # PostgreSQL: read the run (a pending run has no history to read), 20
    # checkpoints, one terminal statement. SQLite and MariaDB/MySQL: the first
    # checkpoint (it also marks the run running) and the terminal commit are
    # transactions (savepoint, fence, writes, release); the turn reads the clock
    # once (the first of them), the other 19 checkpoints are one statement each.
    assert counts[20] == {"postgresql": 22, "sqlite": 32, "mysql": 32}[connection.vendor], sql
    if connection.vendor == "mysql":
        checkpoints = [s for s in sql if s.startswith("INSERT INTO `weft_django_workflowevent`")]
        assert len(checkpoints) == 20
        fences = [s for s in sql if s.startswith("SELECT 1 FROM `weft_django_claim`")]
        assert len(fences) == 2  # the two transactions; the 19 others fence in the INSERT


@pytest.mark.django_db(transaction=True)
def test_a_pending_run_with_history_is_refused_not_replayed_twice(
    make_engine: Callable[..., Any],
) -> None:
    """The first turn of a pending run skips the history read (a pending run has
    none). Were a history there anyway, the replayed checkpoint hits the unique
    (run, seq) constraint: the turn fails on the database, nothing is doubled."""
    engine = make_engine()
    weft.start("tests.finish.steps", 2, workflow_id="fin-history")
    WorkflowEvent.objects.create(run_id="fin-history", seq=0, kind="step", name="_noop")
    engine.acquire("fin-history")
    assert engine.drive("fin-history") is TurnOutcome.ABANDONED
    assert list(WorkflowEvent.objects.filter(run_id="fin-history").values_list("seq", "epoch")) == [
        (0, 0)
    ]
    assert WorkflowRun.objects.get(pk="fin-history").status == RunStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_start_outside_a_transaction_is_one_insert(weft_settings: Any) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        weft.start("tests.echo", 1, workflow_id="start-1")
    sql = [query["sql"] for query in queries.captured_queries]
    # PostgreSQL: WITH ins AS (INSERT ...) SELECT ..., pg_notify(...): the wake-up in it
    assert [s.split()[0] for s in sql] in (["INSERT"], ["WITH"]), sql
    run = WorkflowRun.objects.get(pk="start-1")
    assert run.created_at is not None and run.created_at == run.updated_at
    with pytest.raises(weft.WorkflowAlreadyExistsError):
        weft.start("tests.echo", 2, workflow_id="start-1")
    assert WorkflowRun.objects.get(pk="start-1").args == [1]


@pytest.mark.django_db
def test_a_duplicate_start_inside_a_transaction_leaves_it_usable() -> None:
    from django.db import transaction

    with transaction.atomic():
        weft.start("tests.echo", workflow_id="start-2")
        with pytest.raises(weft.WorkflowAlreadyExistsError):
            weft.start("tests.echo", workflow_id="start-2")
        assert WorkflowRun.objects.filter(pk="start-2").count() == 1  # still usable


@pytest.mark.django_db(transaction=True)
def test_a_start_inside_a_transaction_is_one_insert_without_a_savepoint(
    weft_settings: Any,
) -> None:
    """PostgreSQL and SQLite: ``INSERT ... ON CONFLICT DO NOTHING`` (a burst of
    starts in one transaction is one statement each); MariaDB: a plain INSERT,
    whose duplicate-key error fails that statement alone (its ``INSERT IGNORE``
    would hide other errors too). No savepoint anywhere."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        weft.start("tests.echo", 1, workflow_id="start-3")
        with pytest.raises(weft.WorkflowAlreadyExistsError):
            weft.start("tests.echo", 2, workflow_id="start-3")
        weft.start("tests.echo", 3, workflow_id="start-4")
    verbs = [
        q["sql"].split()[0].upper()
        for q in queries.captured_queries
        if not q["sql"].startswith("SELECT pg_notify")
    ]
    statements = [v for v in verbs if v not in ("BEGIN", "BEGIN IMMEDIATE", "COMMIT")]
    assert len(statements) == 3 and "SAVEPOINT" not in verbs, verbs
    runs = dict(WorkflowRun.objects.filter(pk__startswith="start-").values_list("pk", "args"))
    assert runs == {"start-3": [1], "start-4": [3]}
    run = WorkflowRun.objects.get(pk="start-4")
    assert run.created_at is not None and run.status == RunStatus.PENDING
