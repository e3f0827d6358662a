"""The fast tick's due-runs query (``scans.held_woken``): what it finds, and that
its cost follows the runs that are due, not the parked runs an engine holds.

Before, the query started from the claims of the engine (a ``holder`` index
scan over every run it holds, then each run's row): 290-500 ms per tick on
PostgreSQL for a worker holding 46,000 parked runs, run four times a second on
the thread that also claims new work, so a 100,000-run burst slowed to about
50 parked runs/s towards its end. The plan test loads 20,000 held parked runs
in bulk and explains the statement (both index walks, in one) before any ANALYZE.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django.models import Claim, WorkflowRun
from weft_django.ownership.clock import db_now
from weft_django.ownership.passes import scans

from ..factories import EngineFactory, WorkflowRunFactory
from ..plans import load_held_parked, plan_nodes

HELD = 20_000


@pytest.mark.django_db
def test_held_woken_finds_the_hinted_and_the_timed_out_runs_this_engine_holds() -> None:
    mine, other = EngineFactory(), EngineFactory()
    now = db_now()
    past, future = now - timedelta(seconds=5), now + timedelta(days=1)
    WorkflowRunFactory(id="hinted", waiting=True, wake_hint_at=past, claim=mine)
    WorkflowRunFactory(id="timer-due", waiting=True, wake_at=past, claim=mine)
    WorkflowRunFactory(id="running-hinted", running=True, wake_hint_at=past, claim=mine)
    WorkflowRunFactory(id="timer-later", waiting=True, wake_at=future, claim=mine)
    WorkflowRunFactory(id="parked", waiting=True, claim=mine)
    WorkflowRunFactory(id="pending-held", claim=mine)  # queued by the worker that claimed it
    WorkflowRunFactory(id="others", waiting=True, wake_hint_at=past, claim=other)
    WorkflowRunFactory(id="unheld", waiting=True, wake_hint_at=past, claim=True)
    WorkflowRunFactory(id="no-claim", waiting=True, wake_hint_at=past)
    WorkflowRunFactory(id="suspended", suspended=True, wake_hint_at=past, claim=mine)
    WorkflowRunFactory(id="ended", completed=True, wake_hint_at=past, wake_at=past, claim=mine)
    found = scans.held_woken(mine.id, now)
    assert sorted(found) == ["hinted", "running-hinted", "timer-due"]
    assert found.index("timer-due") == 2  # hinted runs first, then due timers
    assert scans.held_woken(mine.id, now, limit=1) in (["hinted"], ["running-hinted"])
    assert scans.held_woken(other.id, now) == ["others"]


@pytest.mark.django_db
def test_held_woken_is_one_statement_whether_or_not_the_hints_fill_the_limit() -> None:
    mine = EngineFactory()
    now = db_now()
    for n in range(3):
        WorkflowRunFactory(id=f"h{n}", waiting=True, wake_hint_at=now, claim=mine)
    with CaptureQueriesContext(connection) as queries:
        scans.held_woken(mine.id, now, limit=10)
    assert len(queries.captured_queries) == 1  # the first page of each kind, together
    with CaptureQueriesContext(connection) as queries:
        assert len(scans.held_woken(mine.id, now, limit=3)) == 3
    assert len(queries.captured_queries) == 1


def _load_held_parked(engine_id: str) -> None:
    """HELD waiting runs held by ``engine_id`` (no ANALYZE), every 5,000th from
    the second with a due timer and from the third with a wake hint."""
    load_held_parked(engine_id, HELD)
    run = connection.ops.quote_name(WorkflowRun._meta.db_table)
    with connection.cursor() as cursor:
        for offset, column, value in (
            (1, "wake_at", "now() - interval '1 minute'"),
            (2, "wake_hint_at", "now()"),
        ):
            ids = [f"p-{n}" for n in range(offset, HELD, 5000)]
            cursor.execute(f"UPDATE {run} SET {column} = {value} WHERE id = ANY(%s)", [ids])


@pytest.mark.postgres
def test_postgresql_walks_the_wake_indexes_not_the_held_claims(db: None) -> None:
    engine = EngineFactory()
    _load_held_parked(engine.id)
    now = db_now()
    assert len(scans.held_woken(engine.id, now)) == 8
    with CaptureQueriesContext(connection) as queries:
        scans.held_woken(engine.id, now)
    assert len(queries.captured_queries) == 1
    table = WorkflowRun._meta.db_table
    walked = set()
    for query in queries.captured_queries:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {query['sql']}")
            (raw,) = cursor.fetchone()
        plan = raw if isinstance(raw, list) else json.loads(raw)
        nodes = plan_nodes(plan[0]["Plan"])
        kinds = {n["Node Type"] for n in nodes}
        assert "Seq Scan" not in kinds and "Sort" not in kinds, kinds
        on_runs = [n for n in nodes if n.get("Relation Name") == table]
        assert len(on_runs) == 2, on_runs  # one walk per kind, in one statement
        assert all(n["Node Type"] == "Index Scan" for n in on_runs), on_runs
        walked.update(n["Index Name"] for n in on_runs)
        used = {n.get("Index Name") for n in nodes if n.get("Index Name")}
        assert "weft_claim_holder_wid_idx" not in used, used
        assert not any(n.get("Join Type") for n in nodes), nodes
    assert walked == {"weft_run_wake_hint_idx", "weft_run_wake_at_idx"}


@pytest.mark.mysql
def test_mariadb_walks_the_wake_indexes_not_the_held_claims(db: None) -> None:
    engine = EngineFactory()
    now = db_now()
    for n in range(200):
        WorkflowRunFactory(
            id=f"m-{n:03d}",
            waiting=True,
            wake_at=None if n % 50 else now - timedelta(minutes=1),
            wake_hint_at=now if n == 7 else None,
            claim=engine,
        )
    assert scans.held_woken(engine.id, now) == ["m-007", "m-000", "m-050", "m-100", "m-150"]
    with CaptureQueriesContext(connection) as queries:
        scans.held_woken(engine.id, now)
    keys = set()
    for query in queries.captured_queries:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {query['sql']}")
            names = [column[0] for column in cursor.description]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        runs = [row for row in rows if row["table"] == "r"]  # the runs, one per kind
        assert len(runs) == 2 and all(row["type"] == "range" for row in runs), rows
        assert not any("filesort" in (row["Extra"] or "") for row in runs), rows
        keys.update(row["key"] for row in runs)
        claims = [row for row in rows if row["table"] == "c"]
        assert all(row["key"] == "PRIMARY" for row in claims), rows
    assert keys == {"weft_run_wake_hint_idx", "weft_run_wake_at_idx"}


@pytest.mark.django_db
def test_held_woken_pages_past_the_due_runs_of_other_engines() -> None:
    mine, other = EngineFactory(), EngineFactory()
    now = db_now()
    for n in range(scans.WOKEN_PAGE * 2 + 5):  # three pages of others' hints first
        WorkflowRunFactory(id=f"o-{n:03d}", waiting=True, wake_hint_at=now, claim=other)
    later = now + timedelta(microseconds=1)
    WorkflowRunFactory(id="mine", waiting=True, wake_hint_at=later, claim=mine)
    assert scans.held_woken(mine.id, later) == ["mine"]


def _load_released_and_finished(count: int) -> None:
    """``count`` waiting runs ``r-<n>`` whose claims were released (no holder, stamped)
    and ``count`` completed runs ``f-<n>`` with free claims, in bulk, no ANALYZE; every
    5,000th released run from the fourth has a wake hint (a resume, a signal)."""
    run = connection.ops.quote_name(WorkflowRun._meta.db_table)
    claim = connection.ops.quote_name(Claim._meta.db_table)
    with connection.cursor() as cursor:
        for prefix, status, stamp in (("r-", "waiting", "now()"), ("f-", "completed", "NULL")):
            cursor.execute(
                f"INSERT INTO {run} (id, workflow_name, workflow_version, status, args, kwargs, "
                "parent_id, created_at, updated_at) "
                "SELECT %s || n, 't.wf', 1, %s, '[]', '{}', '', now(), now() "
                "FROM generate_series(0, %s) n",
                [prefix, status, count - 1],
            )
            cursor.execute(
                f"INSERT INTO {claim} (workflow_id, epoch, released_at) "
                f"SELECT %s || n, 1, {stamp} FROM generate_series(0, %s) n",
                [prefix, count - 1],
            )
        ids = [f"r-{n}" for n in range(3, count, 5000)]
        cursor.execute(f"UPDATE {run} SET wake_hint_at = now() WHERE id = ANY(%s)", [ids])


@pytest.mark.postgres
def test_postgresql_takes_released_due_runs_by_key_not_by_scanning(make_engine) -> None:
    """The tick's take of released runs that are due (the release rule): the wake
    indexes, then the claims and runs of the due ones by primary key, whatever the
    parked, released and finished runs around them."""
    engine = make_engine()
    _load_held_parked(engine.engine_id)
    _load_released_and_finished(HELD)
    now = db_now()
    held = scans.held_woken(engine.engine_id, now)
    with CaptureQueriesContext(connection) as queries:
        due = engine.ownership.due_runs(now, ["t.wf"], limit=100)
    taken = [f"r-{n}" for n in range(3, HELD, 5000)]
    assert len(held) == 8 and sorted(due) == sorted([*held, *taken])
    assert Claim.objects.filter(pk__in=taken, holder_id=engine.engine_id).count() == len(taken)
    statements = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith(("SELECT", "UPDATE"))
        and "set_config" not in q["sql"]
        and "current_setting" not in q["sql"]
    ]
    # The two wake-index pages (one statement); then the claims locked, the runs
    # re-read, the claims moved.
    assert len(statements) == 4, statements
    claim_table, run_table = Claim._meta.db_table, WorkflowRun._meta.db_table
    for sql in statements:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            (raw,) = cursor.fetchone()
        plan = raw if isinstance(raw, list) else json.loads(raw)
        nodes = plan_nodes(plan[0]["Plan"])
        kinds = {n["Node Type"] for n in nodes}
        assert "Seq Scan" not in kinds, (sql, kinds)
        for node in [n for n in nodes if n.get("Index Name")]:
            index, cond = node.get("Index Name"), node.get("Index Cond", "")
            if index in ("weft_run_wake_hint_idx", "weft_run_wake_at_idx"):
                continue  # the tick's pages, walked in order up to WOKEN_PAGE rows
            # Anything else is looked up by the keys of the due runs (a page's row,
            # or the ids the page found): the primary keys, or the claims'
            # (holder, workflow_id) index seeked on both.
            # (the hand-written page names the runs ``r``; a second branch ``r_1``)
            aliased = re.search(r"\(r(_\d+)?\.id\)", cond) is not None
            keyed = ("= ANY" in cond) or (f"{run_table}.id" in cond) or aliased
            by_key = (f"{claim_table}_pkey", f"{run_table}_pkey", "weft_claim_holder_wid_idx")
            assert index in by_key, (sql, index)
            assert keyed and ("workflow_id" in cond or "id" in cond), (sql, cond)
