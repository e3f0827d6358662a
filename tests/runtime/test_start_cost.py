"""What starting work costs, pinned per verb on every database: statements sent
and transactions committed. A start is one statement and one commit (its
wake-up in it on PostgreSQL); inside the caller's ``atomic()`` it adds one
statement and nothing else, a duplicate id included; a bulk start is one
statement per chunk. ``signal()`` and ``update()`` are pinned as they are."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import django
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import weft_django as weft
from weft_django.models import UpdateRequest, WorkflowRun, WorkflowSignal
from weft_django.runtime import starts

# Commits are counted only where the test database is not one test transaction.
committing = pytest.mark.django_db(transaction=True)
WAITER = "tests.cost.waiter"


@weft.workflow(name=WAITER)
def waiter(ctx: weft.Context, *args: object, **kwargs: object) -> object:
    return ctx.wait_for_signal("go")


class Cost:
    """Statements and commits seen by :func:`cost`: ``BEGIN``/``COMMIT`` are
    Django's transaction markers (SQLite's ``BEGIN IMMEDIATE`` is a statement it
    sends, not counted as one); a write outside them commits alone (a read
    outside them is not counted as a commit: it writes nothing to flush; a
    ``NOTIFY`` is: it is delivered by a commit of its own)."""

    def __init__(self) -> None:
        self.queries = CaptureQueriesContext(connection)
        self.statements = 0
        self.commits = 0
        self.sql: list[str] = []

    def count(self) -> None:
        in_transaction = connection.in_atomic_block
        begun = in_transaction
        for query in self.queries.captured_queries:
            sql = query["sql"]
            if sql.startswith("BEGIN"):  # SQLite's BEGIN IMMEDIATE is sent as a statement
                begun = True
            elif sql in ("COMMIT", "ROLLBACK"):
                self.commits += sql == "COMMIT"
                begun = in_transaction
            else:
                self.statements += 1
                self.sql.append(sql[:120])
                writes = not sql.startswith("SELECT") or "pg_notify" in sql
                self.commits += not begun and writes

    def __repr__(self) -> str:
        return f"<{self.statements} statements, {self.commits} commits: {self.sql}>"


@contextmanager
def cost() -> Iterator[Cost]:
    found = Cost()
    with found.queries:
        yield found
    found.count()


def vendor() -> str:
    return str(connection.vendor)


@committing
def test_a_start_is_one_statement_and_one_commit() -> None:
    with cost() as start:
        weft.start(WAITER, workflow_id="c-1")
    assert (start.statements, start.commits) == (1, 1), start
    assert WorkflowRun.objects.get(pk="c-1").status == "pending"
    with cost() as later:  # a start time: the database clock is read first
        weft.start(WAITER, workflow_id="c-later", start_at=timezone.now())
    assert (later.statements, later.commits) == (2, 1), later


@pytest.mark.django_db
def test_a_duplicate_start_is_one_statement_and_stores_nothing() -> None:
    weft.start(WAITER, workflow_id="c-dup", note="first")
    with cost() as duplicate, pytest.raises(weft.WorkflowAlreadyExistsError):
        weft.start(WAITER, workflow_id="c-dup", note="second")
    assert duplicate.statements == 1, duplicate
    assert WorkflowRun.objects.get(pk="c-dup").kwargs == {"note": "first"}


@committing
def test_inside_atomic_a_start_adds_one_statement_and_a_duplicate_keeps_it_usable() -> None:
    weft.start(WAITER, workflow_id="c-old")
    with cost() as inside, transaction.atomic():
        weft.start(WAITER, workflow_id="c-a")
        with pytest.raises(weft.WorkflowAlreadyExistsError):
            weft.start(WAITER, workflow_id="c-old")
        weft.start(WAITER, workflow_id="c-b")
    # three statements, no savepoint, and the caller's one commit
    assert (inside.statements, inside.commits) == (3, 1), inside
    assert not any("SAVEPOINT" in sql for sql in inside.sql)
    assert set(WorkflowRun.objects.values_list("pk", flat=True)) == {"c-old", "c-a", "c-b"}


@pytest.mark.django_db
def test_a_start_rolled_back_with_the_caller_leaves_nothing() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        weft.start(WAITER, workflow_id="c-gone")
        weft.start_many([weft.StartRequest(WAITER, workflow_id="c-gone-2")])
        raise RuntimeError("roll back")
    assert not WorkflowRun.objects.exists()


@committing
def test_start_many_is_one_statement_per_chunk_and_one_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests = [weft.StartRequest(WAITER, workflow_id=f"m-{n}") for n in range(5)]
    with cost() as one:
        handles = weft.start_many(requests)
    assert (one.statements, one.commits) == (1, 1), one
    assert [h.id for h in handles if isinstance(h, weft.WorkflowHandle)] == [
        f"m-{n}" for n in range(5)
    ]
    monkeypatch.setattr(starts, "CHUNK", 2)
    later = timezone.now() + timedelta(hours=1)
    requests = [
        weft.StartRequest(
            WAITER, (n,), {"k": n}, workflow_id=f"n-{n}", start_at=later if n else None
        )
        for n in range(5)
    ]
    with cost() as chunked:
        weft.start_many(requests)
    # a clock read (the start times) and an INSERT per chunk, in one transaction
    assert (chunked.statements, chunked.commits) == (6, 1), chunked
    assert WorkflowRun.objects.count() == 10
    stored = {run.pk: run for run in WorkflowRun.objects.filter(pk__startswith="n-")}
    assert [(stored[f"n-{n}"].args, stored[f"n-{n}"].kwargs) for n in range(5)] == [
        ([n], {"k": n}) for n in range(5)
    ]
    assert stored["n-0"].start_at is None and stored["n-0"].wake_at is None
    assert stored["n-4"].start_at == later and stored["n-4"].wake_at == later
    assert stored["n-4"].status == "pending" and stored["n-4"].created_at < later


@committing
def test_start_many_reports_duplicates_per_item_and_starts_the_rest() -> None:
    weft.start(WAITER, workflow_id="d-1")
    requests = [
        weft.StartRequest(WAITER, workflow_id="d-0"),
        weft.StartRequest(WAITER, workflow_id="d-1"),  # exists
        weft.StartRequest(WAITER, workflow_id="d-2"),
        weft.StartRequest(WAITER, workflow_id="d-0"),  # repeats the first
    ]
    with cost() as mixed:
        outcomes = weft.start_many(requests)
    assert [type(o).__name__ for o in outcomes] == [
        "WorkflowHandle",
        "WorkflowAlreadyExistsError",
        "WorkflowHandle",
        "WorkflowAlreadyExistsError",
    ]
    assert [getattr(o, "id", None) or getattr(o, "workflow_id", None) for o in outcomes] == [
        "d-0",
        "d-1",
        "d-2",
        "d-0",
    ]
    # MariaDB: the chunk's INSERT fails on the duplicate alone; its rows one by one.
    expected = (4, 2) if vendor() == "mysql" else (1, 1)
    assert (mixed.statements, mixed.commits) == expected, mixed
    assert sorted(WorkflowRun.objects.values_list("pk", flat=True)) == ["d-0", "d-1", "d-2"]


@pytest.mark.django_db
def test_start_many_with_one_bad_request_stores_nothing_and_names_it() -> None:
    requests = [
        weft.StartRequest(WAITER, workflow_id="b-0"),
        weft.StartRequest(WAITER, kwargs={"blob": object()}),  # not JSON
        weft.StartRequest("tests.no.such.workflow"),
        weft.StartRequest(WAITER, workflow_id=""),
    ]
    with cost() as refused, pytest.raises(weft.StartManyError) as error:
        weft.start_many(requests)
    assert refused.statements == 0
    assert sorted(error.value.errors) == [1, 2, 3]
    assert isinstance(error.value.errors[1], weft.PayloadError)
    assert isinstance(error.value.errors[2], weft.WorkflowNotRegisteredError)
    assert isinstance(error.value.errors[3], weft.InvalidIdError)
    assert "request 1" in str(error.value)
    assert not WorkflowRun.objects.exists()
    with pytest.raises(weft.StartManyError) as wrong_type:
        weft.start_many([(WAITER,)])  # type: ignore[list-item]
    assert isinstance(wrong_type.value.errors[0], TypeError)


@committing
def test_a_signal_and_an_update_request_are_pinned() -> None:
    """Not made cheaper here: pinned so that a change shows. ``signal``: a
    repeated ``signal_id`` looked for, the clock, the wake hint, the signal, one
    commit (then the NOTIFY on PostgreSQL). ``update(timeout=0)``: the run read,
    the repeated ``update_id`` looked for, the clock, the hint, the request, one
    commit (the NOTIFY), the answer looked for once."""
    weft.start(WAITER, workflow_id="s-1")
    with cost() as signal:
        weft.signal("s-1", "go", {"n": 1}, signal_id="sig-1")
    assert WorkflowSignal.objects.filter(run_id="s-1").count() == 1
    with cost() as update, pytest.raises(weft.UpdateTimeoutError):
        weft.update("s-1", "bump", 1, timeout=0, update_id="up-1")
    assert UpdateRequest.objects.filter(run_id="s-1").count() == 1
    # PostgreSQL: the NOTIFY after the commit is one statement and commit more.
    pinned = {
        "postgresql": {"signal": (5, 2), "update": (7, 2)},
        "sqlite": {"signal": (4, 1), "update": (6, 1)},
        "mysql": {"signal": (4, 1), "update": (6, 1)},
    }[vendor()]
    assert (signal.statements, signal.commits) == pinned["signal"], signal
    assert (update.statements, update.commits) == pinned["update"], update


@committing
@pytest.mark.skipif(django.VERSION < (6, 0), reason="django.tasks is new in Django 6.0")
def test_an_enqueue_is_one_statement_and_one_commit_and_reads_nothing() -> None:
    from django.tasks import TaskResultStatus

    from example_project.orders.background import send_receipt

    with cost() as enqueue:
        result = send_receipt.enqueue(1, email="a@example.com")
    assert (enqueue.statements, enqueue.commits) == (1, 1), enqueue
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs) == ([1], {"email": "a@example.com"})
    assert send_receipt.get_backend().get_result(result.id).status == TaskResultStatus.READY
    backend = send_receipt.get_backend()
    with cost() as many:
        results = backend.enqueue_many(send_receipt, [((n, "b@example.com"), {}) for n in range(3)])
    assert (many.statements, many.commits) == (1, 1), many
    assert [r.args for r in results] == [[n, "b@example.com"] for n in range(3)]
    assert WorkflowRun.objects.filter(workflow_name="django.tasks.default").count() == 4
