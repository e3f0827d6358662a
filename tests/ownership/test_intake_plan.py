"""Pickup does not scan the backlog, whatever the statistics say.

50,000 pending runs (and 10,000 parked ones with claims) are loaded in bulk and
the intake's window statement is explained right away, before any ANALYZE
(autovacuum has not seen the table either: it is inside the test's
transaction). The plan must walk the ready-queue index in order and stop at
the LIMIT: no sequential scan of the run table, no sort of it, no (anti-)join
over it. Checked for the first page and for a page that goes on from a row,
with the (name, version) pairs a worker serves (workflow versions side by
side: a filter on the rows the index walk returns, never an index of its own).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from weft_django.models import Claim, WorkflowRun
from weft_django.ownership import Served
from weft_django.ownership.claims.intake import window_statement

from ..plans import plan_nodes

PENDING = 50_000
PARKED = 10_000
# What a worker serving two versions of t.wf and one of t.other claims.
NAMES = Served([("t.wf", 1), ("t.wf", 2), ("t.other", 1)])
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def load_backlog() -> None:
    """PENDING pending runs and PARKED waiting runs, each parked one with a claim."""
    run = connection.ops.quote_name(WorkflowRun._meta.db_table)
    claim = connection.ops.quote_name(Claim._meta.db_table)
    columns = (
        "(id, workflow_name, workflow_version, status, args, kwargs, parent_id, "
        "created_at, updated_at)"
    )
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {run} {columns} SELECT 'run-' || n, 't.wf', 1, "
                "CASE WHEN n < %s THEN 'waiting' ELSE 'pending' END, '[]', '{}', '', "
                "%s + n * interval '1 millisecond', %s FROM generate_series(0, %s) n",
                [PARKED, NOW - timedelta(days=1), NOW, PENDING + PARKED - 1],
            )
            cursor.execute(
                f"INSERT INTO {claim} (workflow_id, epoch, holder_id, claimed_at) "
                "SELECT 'run-' || n, 1, NULL, NULL FROM generate_series(0, %s) n",
                [PARKED - 1],
            )
            return
        base = NOW - timedelta(days=1)
        rows = [
            (
                f"run-{n}",
                "t.wf",
                1,
                "waiting" if n < PARKED else "pending",
                "[]",
                "{}",
                "",
                connection.ops.adapt_datetimefield_value(base + timedelta(milliseconds=n)),
                connection.ops.adapt_datetimefield_value(NOW),
            )
            for n in range(PENDING + PARKED)
        ]
        for start in range(0, len(rows), 5000):
            cursor.executemany(
                f"INSERT INTO {run} {columns} VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows[start : start + 5000],
            )
        cursor.executemany(
            f"INSERT INTO {claim} (workflow_id, epoch, holder_id, claimed_at) "
            "VALUES (%s, 1, NULL, NULL)",
            [(f"run-{n}",) for n in range(PARKED)],
        )


PAGES: list[dict[bool, Any]] = [
    {False: None, True: None},
    {False: (None, datetime(2025, 12, 31, 6, tzinfo=UTC), "run-30000")},
    {True: (datetime(2025, 12, 31, tzinfo=UTC), datetime(2025, 12, 31, tzinfo=UTC), "run-1")},
]


def statement(page: dict[bool, Any]) -> tuple[str, list[Any]]:
    sql, params = window_statement(connection, NOW, NAMES, 64, page)
    ops = connection.ops
    adapted = [ops.adapt_datetimefield_value(p) if isinstance(p, datetime) else p for p in params]
    return sql, adapted


@pytest.mark.postgres
@pytest.mark.parametrize("page", PAGES)
def test_postgresql_walks_the_ready_index(db: None, page: dict[bool, Any]) -> None:
    load_backlog()
    sql, params = statement(page)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    nodes = plan_nodes(plan[0]["Plan"])
    table = WorkflowRun._meta.db_table
    on_runs = [n for n in nodes if n.get("Relation Name") == table]
    assert len(on_runs) == len(page), nodes
    for node in on_runs:
        # The scheduled branch may be read through a bitmap of the same index
        # (bounded by start_at <= now), then sorted: due scheduled runs only.
        assert node["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan"), node
        scans = [node] if node["Node Type"] != "Bitmap Heap Scan" else plan_nodes(node)[1:]
        # Index walks use the ready queue. A bitmap (the scheduled branch, once the
        # table has statistics) may also come from weft_run_active_idx, whose
        # condition bounds it the same way: pending runs whose start time has come.
        allowed = {"weft_run_ready_idx"}
        if node["Node Type"] == "Bitmap Heap Scan":
            allowed.add("weft_run_active_idx")
        assert any(n.get("Index Name") in allowed for n in scans), [
            (n["Node Type"], n.get("Index Name"), n.get("Index Cond")) for n in plan_nodes(node)
        ]
        for scan in scans:
            if scan.get("Index Name") == "weft_run_active_idx":
                assert "start_at <=" in scan["Index Cond"], scan["Index Cond"]
    kinds = {n["Node Type"] for n in nodes}
    assert "Seq Scan" not in kinds, kinds
    used = {n["Index Name"] for n in nodes if "Index Name" in n}
    assert not any("workflow_name" in name for name in used), used
    assert not any(n.get("Join Type") in ("Anti", "Semi") for n in nodes), nodes
    assert not any(n["Node Type"] in ("Hash Join", "Merge Join", "Nested Loop") for n in nodes)
    for sort in (n for n in nodes if n["Node Type"] == "Sort"):
        assert any("start_at" in key for key in sort["Sort Key"]), sort
    # Runs without a start time (the burst) are walked in index order: no sort.
    if False in page:
        unscheduled = plan[0]["Plan"] if len(page) == 1 else plan[0]["Plan"]["Plans"][0]
        assert "Sort" not in {n["Node Type"] for n in plan_nodes(unscheduled)}, unscheduled
    assert sum(1 for n in nodes if n["Node Type"] == "Limit") == len(page), kinds


@pytest.mark.mysql
@pytest.mark.parametrize("page", PAGES)
def test_mariadb_walks_the_active_index_in_order(db: None, page: dict[bool, Any]) -> None:
    load_backlog()
    sql, params = statement(page)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    on_runs = [row for row in rows if row["table"] == "r"]
    assert len(on_runs) == len(page), rows
    for row in on_runs:
        assert row["type"] != "ALL", row
        assert row["key"] == "weft_run_active_idx", row
        assert "temporary" not in (row["Extra"] or ""), row
    if False in page:  # runs without a start time: walked in index order, no sort
        assert "filesort" not in (on_runs[0]["Extra"] or ""), on_runs[0]
    for row in rows:
        if row["table"] == "c":  # the claim of a returned row: its primary key
            assert row["key"] == "PRIMARY" and row["type"] == "eq_ref", row


@pytest.mark.parametrize("page", PAGES)
def test_sqlite_walks_the_ready_index(db: None, page: dict[bool, Any]) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's EXPLAIN QUERY PLAN")
    load_backlog()
    sql, params = statement(page)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        details = [row[-1] for row in cursor.fetchall()]
    on_runs = [d for d in details if d.startswith(("SCAN r", "SEARCH r"))]
    assert len(on_runs) == len(page), details
    assert all("USING INDEX weft_run_ready_idx" in d for d in on_runs), "; ".join(details)
    assert not any("TEMP B-TREE" in d for d in details), details
    claims = [d for d in details if d.startswith(("SCAN c", "SEARCH c"))]
    assert all(d.startswith("SEARCH c") for d in claims), details
