"""First turns read ahead for a whole intake batch: one statement for the batch,
no read of their own in the turns, and nothing lost to what is stored between
the read and the turn (a signal, an update request, a cancel)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Exists, OuterRef
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from tests.updates import workflows as update_workflows
from weft_django import UpdateTimeoutError
from weft_django.models import (
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from weft_django.ownership.clock import DbNow
from weft_django.runtime.engine import TurnOutcome
from weft_django.runtime.prefetch import (
    SIGNALS_BUFFERED,
    UPDATES_PENDING,
    FirstTurnReads,
    read_first_turns,
)
from weft_django.runtime.runs import RUN_FIELDS

from .test_finish import many_steps
from .test_park import waiter

assert waiter and many_steps  # registers tests.park.waiter and tests.finish.steps
assert update_workflows  # registers tests.updates.counter


def _claimed(engine: Any, *run_ids: str) -> None:
    for run_id in run_ids:
        engine.acquire(run_id)


@pytest.mark.django_db
def test_a_batch_is_read_in_one_statement_and_only_its_pending_runs_are_kept(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    ids = [f"pf-b{n}" for n in range(20)]
    for run_id in ids:
        weft.start("tests.park.waiter", workflow_id=run_id)
    _claimed(engine, *ids)
    weft.cancel("pf-b0")
    with CaptureQueriesContext(connection) as queries:
        assert engine.prefetch(ids) == 19
    assert len(queries.captured_queries) == 1
    assert len(engine.first_turns) == 19
    assert engine.first_turns.take("pf-b0") is None


@pytest.mark.django_db
def test_a_prefetched_first_turn_that_parks_is_one_statement_on_postgresql(
    make_engine: Callable[..., Any],
) -> None:
    """Without the read ahead it is four (tests/runtime/test_park.py)."""
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement park is PostgreSQL's (elsewhere a fenced transaction)")
    engine = make_engine()
    weft.start("tests.park.waiter", workflow_id="pf-1")
    _claimed(engine, "pf-1")
    engine.prefetch(["pf-1"])
    with CaptureQueriesContext(connection) as queries:
        assert engine.drive("pf-1") is TurnOutcome.PARKED
    assert len(queries.captured_queries) == 1, [q["sql"][:120] for q in queries]
    run = WorkflowRun.objects.get(pk="pf-1")
    assert run.status == RunStatus.WAITING and run.started_at is not None
    assert list(WorkflowEvent.objects.filter(run_id="pf-1").values_list("kind", flat=True)) == [
        "wait"
    ]


@pytest.mark.django_db
def test_a_prefetched_turn_reads_no_run_signal_or_update_on_any_database(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.park.waiter", workflow_id="pf-2")
    _claimed(engine, "pf-2")
    engine.prefetch(["pf-2"])
    with CaptureQueriesContext(connection) as queries:
        assert engine.drive("pf-2") is TurnOutcome.PARKED
    reads = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("SELECT")]
    for table in ("weft_django_workflowsignal", "weft_django_updaterequest"):
        assert not [sql for sql in reads if f"FROM {connection.ops.quote_name(table)}" in sql]
    assert not [
        sql
        for sql in reads
        if sql.lstrip().upper().startswith('SELECT "WEFT_DJANGO_WORKFLOWRUN"."ID"')
        or sql.lstrip().startswith("SELECT `weft_django_workflowrun`.`id`")
    ]


@pytest.mark.django_db
def test_a_signal_buffered_before_the_read_is_taken_in_the_first_turn(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.park.waiter", workflow_id="pf-3")
    weft.signal("pf-3", "go", "early", signal_id="early-1")
    _claimed(engine, "pf-3")
    engine.prefetch(["pf-3"])
    assert engine.drive("pf-3") is TurnOutcome.COMPLETED
    assert weft.result("pf-3", timeout=0) == "early"


@pytest.mark.django_db
def test_a_signal_stored_after_the_read_wakes_the_parked_run(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.park.waiter", workflow_id="pf-4")
    _claimed(engine, "pf-4")
    engine.prefetch(["pf-4"])
    weft.signal("pf-4", "go", "late", signal_id="late-1")
    assert engine.drive("pf-4") is TurnOutcome.PARKED  # the read saw no signal
    run = WorkflowRun.objects.get(pk="pf-4")
    assert run.status == RunStatus.WAITING and run.wake_hint_at is not None
    assert engine.ownership.due_runs(engine.now(), ["tests.park.waiter"], limit=10) == ["pf-4"]
    assert engine.drive("pf-4") is TurnOutcome.COMPLETED
    assert weft.result("pf-4", timeout=0) == "late"


def _send_update(run_id: str, amount: int) -> None:
    with pytest.raises(UpdateTimeoutError):
        weft.update(run_id, "add", amount, timeout=0, update_id=f"{run_id}-add-{amount}")


@pytest.mark.django_db
def test_an_update_request_stored_before_the_read_is_applied_in_the_first_turn(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.updates.counter", workflow_id="pf-5")
    _send_update("pf-5", 2)
    _claimed(engine, "pf-5")
    engine.prefetch(["pf-5"])
    assert engine.drive("pf-5") is TurnOutcome.PARKED
    assert UpdateRequest.objects.get(run_id="pf-5").status == "applied"


@pytest.mark.django_db
def test_an_update_request_stored_after_the_read_wakes_the_parked_run(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.updates.counter", workflow_id="pf-10")
    _claimed(engine, "pf-10")
    engine.prefetch(["pf-10"])
    _send_update("pf-10", 3)
    assert engine.drive("pf-10") is TurnOutcome.PARKED  # the read saw no request
    assert UpdateRequest.objects.get(run_id="pf-10").status == "pending"
    assert engine.ownership.due_runs(engine.now(), ["tests.updates.counter"], limit=10) == ["pf-10"]
    assert engine.drive("pf-10") is TurnOutcome.PARKED
    assert UpdateRequest.objects.get(run_id="pf-10").status == "applied"


@pytest.mark.django_db
def test_a_run_cancelled_after_the_read_is_not_written_by_its_stale_turn(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.park.waiter", workflow_id="pf-6")
    _claimed(engine, "pf-6")
    engine.prefetch(["pf-6"])
    weft.cancel("pf-6")
    assert engine.drive("pf-6") is TurnOutcome.DEPOSED
    run = WorkflowRun.objects.get(pk="pf-6")
    assert run.status == RunStatus.CANCELLED and run.started_at is None
    assert not WorkflowEvent.objects.filter(run_id="pf-6").exists()


@pytest.mark.django_db
def test_a_row_is_taken_once_and_not_after_its_ttl(make_engine: Callable[..., Any]) -> None:
    engine = make_engine()
    for run_id in ("pf-7", "pf-8"):
        weft.start("tests.park.waiter", workflow_id=run_id)
    reads = FirstTurnReads(engine.using)
    assert reads.load(["pf-7"]) == 1
    row = reads.take("pf-7")
    assert row is not None and row["id"] == "pf-7" and row["signals_buffered"] is False
    assert reads.take("pf-7") is None
    stale = FirstTurnReads(engine.using, ttl=-1.0)
    assert stale.load(["pf-8"]) == 1
    assert stale.take("pf-8") is None
    assert stale.load([]) == 0 and len(stale) == 0


@pytest.mark.django_db
def test_without_a_read_ahead_a_first_turn_reads_for_itself(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.park.waiter", workflow_id="pf-9")
    weft.signal("pf-9", "go", "x", signal_id="x-1")
    _claimed(engine, "pf-9")
    engine.first_turns.ttl = -1.0
    engine.prefetch(["pf-9"])  # stale at once: the turn reads the run and the signal
    assert engine.drive("pf-9") is TurnOutcome.COMPLETED
    assert weft.result("pf-9", timeout=0) == "x"


@pytest.mark.django_db
def test_a_prefetched_ten_step_run_is_eleven_statements_on_postgresql(
    make_engine: Callable[..., Any],
) -> None:
    """Ten one-statement checkpoints and the one-statement terminal commit: no read."""
    if connection.vendor != "postgresql":
        pytest.skip("one-statement checkpoints and terminal commit are PostgreSQL's")
    engine = make_engine()
    weft.start("tests.finish.steps", 10, workflow_id="pf-steps")
    _claimed(engine, "pf-steps")
    engine.prefetch(["pf-steps"])
    with CaptureQueriesContext(connection) as queries:
        assert engine.drive("pf-steps") is TurnOutcome.COMPLETED
    sql = [q["sql"] for q in queries if not q["sql"].startswith("SELECT pg_notify")]
    assert len(sql) == 11, [s[:80] for s in sql]
    assert weft.result("pf-steps", timeout=0) == 10


@pytest.mark.django_db
def test_a_turn_reads_the_database_clock_once(make_engine: Callable[..., Any]) -> None:
    """A timed wait judges its deadline twice (set it, then check it): one clock
    read without a read ahead, none with one."""
    from weft_django.ownership import clock

    engine = make_engine()
    for run_id in ("pf-c1", "pf-c2"):
        weft.start("tests.park.timed_waiter", workflow_id=run_id)
        _claimed(engine, run_id)
    engine.prefetch(["pf-c2"])
    clock_sql = f"SELECT {clock.NOW_SQL[connection.vendor]}"
    for run_id, reads in (("pf-c1", 1), ("pf-c2", 0)):
        with CaptureQueriesContext(connection) as queries:
            assert engine.drive(run_id) is TurnOutcome.PARKED
        assert [q["sql"] for q in queries].count(clock_sql) == reads, run_id
    run = WorkflowRun.objects.get(pk="pf-c2")
    assert run.wake_at is not None and run.waiting_on["deadline"] is not None


def _as_the_orm_reads_them(run_ids: list[str]) -> list[dict[str, Any]]:
    """The rows :func:`read_first_turns` reads, by a queryset (what it replaced)."""
    signals = WorkflowSignal.objects.filter(run_id=OuterRef("pk"), consumed_at__isnull=True)
    updates = UpdateRequest.objects.filter(run_id=OuterRef("pk"), status=UpdateStatus.PENDING)
    return list(
        WorkflowRun.objects.filter(pk__in=run_ids, status=RunStatus.PENDING)
        .annotate(**{SIGNALS_BUFFERED: Exists(signals), UPDATES_PENDING: Exists(updates)})
        .values(*RUN_FIELDS, SIGNALS_BUFFERED, UPDATES_PENDING)
        .order_by("pk")
    )


@pytest.mark.django_db
def test_the_batch_read_gives_each_value_as_the_orm_does() -> None:
    """JSON decoded (nested, non-ASCII, null inside), timestamps aware and exact
    to the microsecond (one written by the database's own clock, one with
    none), flags as bool, a run that is not pending left out."""
    when = datetime(2026, 12, 3, 14, 40, 41, 37441, tzinfo=UTC)
    WorkflowRun.objects.bulk_create(
        [
            WorkflowRun(
                id="pf-v1",
                workflow_name="tests.park.waiter",
                args=[1, 2.5, {"naïve": ["ü", None, True]}],
                kwargs={"k": {"deep": [1, {"x": "y"}]}},
                parent_id="pf-parent",
                start_at=when,
                timeout_at=when + timedelta(hours=1),
            ),
            WorkflowRun(id="pf-v2", workflow_name="tests.park.waiter", start_at=None),
            WorkflowRun(id="pf-v3", workflow_name="tests.park.waiter", status=RunStatus.WAITING),
        ]
    )
    WorkflowRun.objects.filter(pk="pf-v2").update(wake_hint_at=DbNow())
    WorkflowSignal.objects.create(run_id="pf-v1", signal_id="s1", name="go")
    WorkflowSignal.objects.create(run_id="pf-v2", signal_id="s2", name="go", consumed_at=when)
    UpdateRequest.objects.create(run_id="pf-v2", update_id="u1", name="add")
    UpdateRequest.objects.create(
        run_id="pf-v1", update_id="u2", name="add", status=UpdateStatus.REJECTED
    )
    ids = ["pf-v1", "pf-v2", "pf-v3", "pf-none"]

    rows = sorted(read_first_turns(ids, using="default"), key=lambda row: row["id"])

    for row in rows:
        assert row.pop("db_now") is not None
    assert rows == _as_the_orm_reads_them(ids)
    assert [(row[SIGNALS_BUFFERED], row[UPDATES_PENDING]) for row in rows] == [
        (True, False),
        (False, True),
    ]
    assert rows[0]["start_at"] == when and rows[0]["start_at"].tzinfo is not None
    assert rows[1]["wake_hint_at"] is not None and rows[1]["wake_hint_at"].tzinfo is not None
    assert read_first_turns([], using="default") == []
