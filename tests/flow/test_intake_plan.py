"""The intake stays index-driven with 100,000 runs waiting for slots.

100,000 pending runs of a limited queue (``payments``, a concurrency key each
of 1,000 customers), 1,000 of them with a positive priority, loaded in bulk
and explained before any ANALYZE. The window statement with its fast lane (the
first page of every pickup) must walk the ready queue's index and the
priority index up to their LIMITs: no sequential scan of the run table, no
sort of it, no join over it (the fast lane reads the pending runs of a
positive priority only; before any statistics a planner may read them as a
bitmap and sort them, which costs in proportion to those runs, never to the
backlog).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from weft_django.models import WorkflowRun
from weft_django.ownership import Served
from weft_django.ownership.claims.intake import window_statement

from ..plans import plan_nodes

WAITING = 100_000
NAMES = Served([("t.wf", 1)], queues={"payments", "default"})
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def load_waiting() -> None:
    run = connection.ops.quote_name(WorkflowRun._meta.db_table)
    columns = (
        "(id, workflow_name, workflow_version, status, args, kwargs, parent_id, created_at, "
        "updated_at, queue, priority, concurrency_key)"
    )
    base = NOW - timedelta(days=1)
    stamp = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {run} {columns} SELECT 'run-' || n, 't.wf', 1, 'pending', '[]', "
                "'{}', '', %s + n * interval '1 millisecond', %s, 'payments', "
                "CASE WHEN n %% 100 = 0 THEN 5 ELSE 0 END, 'c-' || (n %% 1000) "
                "FROM generate_series(0, %s) n",
                [base, NOW, WAITING - 1],
            )
            return
        if connection.vendor == "mysql":
            cursor.execute(
                f"INSERT INTO {run} {columns} SELECT CONCAT('run-', seq), 't.wf', 1, 'pending', "
                "'[]', '{}', '', %s + INTERVAL seq * 1000 MICROSECOND, %s, 'payments', "
                "IF(seq %% 100 = 0, 5, 0), CONCAT('c-', seq %% 1000) "
                f"FROM seq_0_to_{WAITING - 1}",
                [stamp(base), stamp(NOW)],
            )
            return
        rows = [
            (
                f"run-{n}",
                stamp(base + timedelta(milliseconds=n)),
                5 if n % 100 == 0 else 0,
                f"c-{n % 1000}",
            )
            for n in range(WAITING)
        ]
        cursor.executemany(
            f"INSERT INTO {run} {columns} VALUES (%s, 't.wf', 1, 'pending', '[]', '{{}}', '', "
            f"%s, '{stamp(NOW)}', 'payments', %s, %s)",
            rows,
        )


def statement() -> tuple[str, list[Any]]:
    sql, params = window_statement(
        connection, NOW, NAMES, 64, {False: None, True: None}, priority=True
    )
    ops = connection.ops
    adapted = [ops.adapt_datetimefield_value(p) if isinstance(p, datetime) else p for p in params]
    return sql, adapted


@pytest.mark.postgres
def test_postgresql_walks_the_ready_and_priority_indexes(db: None) -> None:
    load_waiting()
    sql, params = statement()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    nodes = plan_nodes(plan[0]["Plan"])
    table = WorkflowRun._meta.db_table
    on_runs = [n for n in nodes if n.get("Relation Name") == table]
    assert len(on_runs) == 3, nodes
    kinds = {n["Node Type"] for n in nodes}
    assert "Seq Scan" not in kinds, kinds
    used = {n.get("Index Name") for n in nodes}
    assert "weft_run_priority_idx" in used, used
    assert not any(n["Node Type"] in ("Hash Join", "Merge Join", "Nested Loop") for n in nodes)
    # The fast lane reads the priority index only (pending runs of a positive
    # priority: with no statistics yet, maybe as a bitmap, then sorted).
    fast_lane = plan_nodes(plan[0]["Plan"]["Plans"][0])
    scans = [n for n in fast_lane if n.get("Relation Name") == table or "Index Name" in n]
    assert {n.get("Index Name") for n in scans if n.get("Index Name")} <= {
        "weft_run_priority_idx",
        "weft_django_claim_pkey",
    }, scans
    # The ready queue's burst branch is walked in index order: no sort.
    ready = plan_nodes(plan[0]["Plan"]["Plans"][1])
    assert "Sort" not in {n["Node Type"] for n in ready}, ready
    assert sum(1 for n in nodes if n["Node Type"] == "Limit") == 3, kinds


@pytest.mark.mysql
def test_mariadb_walks_the_indexes_in_order(db: None) -> None:
    load_waiting()
    sql, params = statement()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    on_runs = [row for row in rows if row["table"] == "r"]
    assert len(on_runs) == 3, rows
    for row in on_runs:
        assert row["type"] != "ALL", row
        assert "temporary" not in (row["Extra"] or ""), row
    # The fast lane: a range of the priority index (pending runs of a positive
    # priority only); the ready queue's burst branch in index order, no sort.
    assert on_runs[0]["key"] == "weft_run_priority_idx", on_runs[0]
    assert on_runs[0]["type"] == "range", on_runs[0]
    assert on_runs[1]["key"] == "weft_run_active_idx", on_runs[1]
    assert "filesort" not in (on_runs[1]["Extra"] or ""), on_runs[1]


def test_sqlite_walks_the_indexes_in_order(db: None) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's EXPLAIN QUERY PLAN")
    load_waiting()
    sql, params = statement()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        details = [row[-1] for row in cursor.fetchall()]
    on_runs = [d for d in details if d.startswith(("SCAN r", "SEARCH r"))]
    assert len(on_runs) == 3, details
    assert "USING INDEX weft_run_priority_idx" in on_runs[0], details
    assert all("USING INDEX weft_run_ready_idx" in d for d in on_runs[1:]), details
    assert not any("TEMP B-TREE" in d for d in details), details
