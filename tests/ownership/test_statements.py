"""The engine's hot statements: prepared by PostgreSQL when the connection allows
it (``OPTIONS["prepare_threshold"]``), Django's ordinary cursor everywhere else,
fenced alike either way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import ProgrammingError, connection
from django.test.utils import CaptureQueriesContext

from weft_django.models import Claim, WorkflowEvent, WorkflowRun
from weft_django.ownership.clock import db_now
from weft_django.ownership.writes import cursor as statements
from weft_django.ownership.writes.cursor import hot_cursor, prepares
from weft_django.ownership.writes.requests import Fence, Finish, Stamp
from weft_django.ownership.writes.single import (
    FencedWrite,
    fenced_finish,
    fenced_write_many,
    write_many_statement,
)

from ..factories import EngineFactory, WorkflowRunFactory
from ..plans import load_held_parked, plan_nodes

WAITING_ON = json.dumps({"kind": "signal", "name": "go"})


def _threshold(monkeypatch: pytest.MonkeyPatch, value: int | None) -> None:
    """Set psycopg's ``prepare_threshold`` on this test's connection (undone after)."""
    connection.ensure_connection()
    monkeypatch.setattr(connection.connection, "prepare_threshold", value)


def _prepared_writes() -> list[tuple[str, int]]:
    """This connection's prepared fenced writes: (name, executions)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name || '@' || prepare_time, generic_plans + custom_plans "
            "FROM pg_prepared_statements "
            "WHERE statement LIKE %s ORDER BY prepare_time",
            ["WITH v (workflow_id%"],
        )
        return list(cursor.fetchall())


@pytest.fixture
def holder(db: None) -> Any:
    """An engine holding the running run ``r``."""
    engine = EngineFactory()
    WorkflowRunFactory(id="r", running=True, claim=engine)
    return engine


def _checkpoint(run_id: str, seq: int, engine_id: str, epoch: int = 1) -> FencedWrite:
    row = (run_id, seq, "step", "s", json.dumps(seq), None, engine_id, epoch, db_now())
    return FencedWrite(run_id, epoch, [row])


@pytest.mark.django_db
def test_without_a_threshold_the_hot_cursor_is_djangos_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if connection.vendor == "postgresql":
        _threshold(monkeypatch, None)  # Django's default for psycopg 3
    assert not prepares(connection)
    with hot_cursor(connection) as hot, connection.cursor() as plain:
        assert type(hot.cursor) is type(plain.cursor)
    with CaptureQueriesContext(connection) as queries, hot_cursor(connection) as cursor:
        cursor.execute("SELECT %s", [1])
        assert cursor.fetchone() == (1,)
    assert len(queries.captured_queries) == 1


@pytest.mark.postgres
def test_with_a_threshold_the_fenced_write_is_prepared_and_still_logged(
    holder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = holder
    _threshold(monkeypatch, 2)
    before = len(_prepared_writes())

    writes = [[_checkpoint("r", seq, engine.id)] for seq in range(4)]

    with CaptureQueriesContext(connection) as queries:
        for requests in writes:
            assert fenced_write_many("default", engine_id=engine.id, requests=requests) == {"r"}

    assert prepares(connection)
    # Logged like any other statement, with its values.
    logged = [query["sql"] for query in queries.captured_queries]
    assert len(logged) == 4
    assert all(sql.startswith("WITH v (workflow_id") and "'r'" in sql for sql in logged)
    prepared = _prepared_writes()
    assert len(prepared) == before + 1  # one shape, prepared once
    assert prepared[-1][1] >= 2  # and executed from the prepared statement since
    assert WorkflowEvent.objects.filter(run_id="r").count() == 4


@pytest.mark.postgres
def test_unprepared_statements_stay_unprepared(
    holder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = holder
    _threshold(monkeypatch, None)
    before = _prepared_writes()
    for seq in range(6):
        fenced_write_many(
            "default", engine_id=engine.id, requests=[_checkpoint("r", seq, engine.id)]
        )
    assert _prepared_writes() == before


@pytest.fixture(params=[None, 0], ids=["unprepared", "prepared"])
def prepared(
    request: pytest.FixtureRequest, db: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    _threshold(monkeypatch, request.param)
    yield


@pytest.mark.postgres
def test_prepared_or_not_writes_and_finishes_land_only_under_their_claim(prepared: None) -> None:
    mine, other = EngineFactory(), EngineFactory()
    for run_id in ("held", "stale", "others"):
        WorkflowRunFactory(id=run_id, running=True, claim=mine if run_id != "others" else other)
    Claim.objects.filter(workflow_id="stale").update(epoch=7)
    for round_ in range(3):  # past the threshold: the prepared statement decides too
        requests = [
            _checkpoint("held", round_, mine.id),
            _checkpoint("stale", round_, mine.id, epoch=1),
            _checkpoint("others", round_, mine.id),
        ]
        assert fenced_write_many("default", engine_id=mine.id, requests=requests) == {"held"}
    assert WorkflowEvent.objects.filter(run_id="held").count() == 3
    assert not WorkflowEvent.objects.exclude(run_id="held").exists()

    def finish(run_id: str, epoch: int) -> bool:
        return fenced_finish(
            "default",
            Fence(run_id, mine.id, epoch),
            Finish(
                [],
                status="completed",
                result_json="1",
                error_json=None,
                parent_id="",
                response_ttl=300.0,
                stamp=Stamp("clock_timestamp()", db_now),
            ),
        )

    assert finish("stale", 1) is False
    assert finish("others", 1) is False
    assert finish("held", 1) is True
    statuses = dict(WorkflowRun.objects.values_list("id", "status"))
    assert statuses == {"held": "completed", "stale": "running", "others": "running"}
    assert Claim.objects.get(workflow_id="held").holder_id is None


def _explain_prepared(name: str, params: list[object]) -> list[dict[str, object]]:
    """The plan nodes of the prepared statement ``name`` run with ``params``."""
    with connection.cursor() as cursor:  # client-side: the values inlined as literals
        placeholders = ", ".join(["%s"] * len(params))
        statement = name.split("@")[0]
        cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE {statement} ({placeholders})", params)
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    return plan_nodes(plan[0]["Plan"])


@pytest.mark.postgres
def test_prepared_statements_are_planned_again_after_the_replan_interval(
    holder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DISCARD PLANS`` once the interval is over, and only then; the statement
    stays prepared under its name and runs on."""
    engine = holder
    _threshold(monkeypatch, 0)
    now = [100.0]
    statements._planned_since.pop(connection.connection, None)  # earlier tests' clock
    sent: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append(sql)
        return execute(sql, params, many, context)

    def write(seq: int) -> list[str]:
        sent.clear()
        with (
            connection.execute_wrapper(record),
            hot_cursor(connection, clock=lambda: now[0]) as cursor,
        ):
            sql, params = write_many_statement(
                connection, engine.id, [_checkpoint("r", seq, engine.id)]
            )
            cursor.execute(sql, params)
        return [sql for sql in sent if "DISCARD" in sql]

    assert write(0) == []
    first = _prepared_writes()
    assert first
    now[0] += statements.REPLAN_INTERVAL - 0.1
    assert write(1) == []
    assert _prepared_writes()[-1] == (first[-1][0], 2)  # the same statement, run again
    now[0] += 0.2  # the interval is over: its plans are dropped, made again at its next run
    assert write(2) == ["DISCARD PLANS"]
    assert _prepared_writes() == [(first[-1][0], 3)]
    assert write(3) == []
    assert WorkflowEvent.objects.filter(run_id="r").count() == 4


@pytest.mark.postgres
def test_a_replan_on_a_connection_that_had_prepared_nothing_yet_breaks_no_later_one(
    holder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first interval of a connection may end before it prepared anything,
    and the next after it did. Dropping the statements (``DEALLOCATE ALL``)
    then left psycopg, which noticed only the first, running a statement the
    server no longer had: "prepared statement ... does not exist" at every
    checkpoint of that connection (found by ``bench/chaos.py``)."""
    engine = holder
    _threshold(monkeypatch, 2)  # prepared at the third execution
    now = [100.0]
    statements._planned_since.pop(connection.connection, None)

    def write(seq: int) -> None:
        with hot_cursor(connection, clock=lambda: now[0]) as cursor:
            sql, params = write_many_statement(
                connection, engine.id, [_checkpoint("r", seq, engine.id)]
            )
            cursor.execute(sql, params)
            assert cursor.fetchall() == [("r",)]

    write(0)  # the first interval begins; nothing prepared
    now[0] += statements.REPLAN_INTERVAL + 0.1
    write(1)  # replan with nothing prepared yet
    write(2)
    write(3)  # prepared here
    assert len(_prepared_writes()) == 1
    now[0] += statements.REPLAN_INTERVAL + 0.1
    write(4)  # replan with the statement prepared: it still runs
    write(5)
    assert WorkflowEvent.objects.filter(run_id="r").count() == 6


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_statement_dropped_behind_psycopgs_back_fails_once_then_a_fresh_connection_runs_it(
    holder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something else drops the prepared statements (a pooler's ``DISCARD ALL``;
    here sent below psycopg, which keeps its record): the next hot statement
    fails, as any database error, and closes its connection, so the one after
    runs on a fresh connection instead of every one failing."""
    engine = holder
    _threshold(monkeypatch, 0)

    def write(seq: int) -> set[str]:
        return fenced_write_many(
            "default", engine_id=engine.id, requests=[_checkpoint("r", seq, engine.id)]
        )

    assert write(0) == {"r"}
    assert _prepared_writes()
    connection.connection.pgconn.exec_(b"DEALLOCATE ALL")
    with pytest.raises(ProgrammingError, match="does not exist"):
        write(1)
    assert connection.connection is None  # closed: the next use reconnects
    assert write(2) == {"r"}
    assert list(WorkflowEvent.objects.filter(run_id="r").values_list("seq", flat=True)) == [0, 2]


@pytest.mark.postgres
def test_a_plan_made_on_small_tables_is_made_again_on_the_grown_ones_and_reads_by_key(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prepared statement's generic plan is made without the values and kept
    while the tables grow. Made while the tables were small, it scanned the
    claims or walked the holder's claims; in a burst every park then cost
    more as runs parked (``bench/burst.py`` fell from about 1,170 to 400-550
    runs/s). After REPLAN_INTERVAL the statement is planned again: over 20,000
    claims of one holder, loaded in bulk with no ANALYZE since the tables
    were small, that plan finds each run's claim and run by key."""
    engine = EngineFactory()
    load_held_parked(engine.id, 3)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Claim._meta.db_table}, {WorkflowRun._meta.db_table}")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    _threshold(monkeypatch, 0)  # prepared at the first execution
    park = FencedWrite("p-1", 1, [], waiting_on_json=WAITING_ON)
    running = _checkpoint("p-2", 0, engine.id)
    running.mark_running = True
    requests = [park, running]
    assert fenced_write_many("default", engine_id=engine.id, requests=requests) == {"p-1", "p-2"}
    small = _prepared_writes()[-1][0]
    load_held_parked(engine.id, 20_000, prefix="q-")

    monkeypatch.setattr(statements, "REPLAN_INTERVAL", 0.0)
    again = _checkpoint("p-2", 1, engine.id)
    again.mark_running = True
    requests = [park, again]
    assert fenced_write_many("default", engine_id=engine.id, requests=requests) == {"p-1", "p-2"}
    (grown,) = [name for name, _ in _prepared_writes()]
    assert grown == small  # still prepared: its plan was made again

    _, params = write_many_statement(connection, engine.id, requests)
    nodes = _explain_prepared(grown, params)
    scans = [n for n in nodes if n.get("Relation Name") and n["Node Type"] != "ModifyTable"]
    shown = [
        (n["Node Type"], n["Relation Name"], n.get("Index Cond") or n.get("Recheck Cond"))
        for n in scans
    ]
    claims = [n for n in scans if n["Relation Name"] == Claim._meta.db_table]
    runs = [n for n in scans if n["Relation Name"] == WorkflowRun._meta.db_table]
    assert claims and runs, shown
    for node in claims + runs:  # probed by the run's id (an index or bitmap probe)
        assert node["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan"), shown
        condition = str(node.get("Index Cond") or node.get("Recheck Cond"))
        assert "workflow_id" in condition or "(id)" in condition, shown
        assert "holder_id" not in condition, shown
