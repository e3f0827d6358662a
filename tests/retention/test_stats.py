"""retention_stats.summary(): table sizes, the oldest prunable run, the capped count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import EngineFactory, WorkflowEventFactory, WorkflowRunFactory
from weft_django.models import WorkflowRun
from weft_django.ownership.clock import db_now
from weft_django.retention.settings import policy
from weft_django.retention.stats import MODELS, PRUNABLE_CAP, summary

pytestmark = pytest.mark.django_db(transaction=True)

DAY = timedelta(days=1)


def analyze() -> None:
    """Refresh the catalog's estimates (what autovacuum does by itself in production)."""
    with connection.cursor() as cursor:
        for model in MODELS:
            table = connection.ops.quote_name(model._meta.db_table)
            if connection.vendor == "postgresql":
                cursor.execute(f"ANALYZE {table}")
            elif connection.vendor == "mysql":
                cursor.execute(f"ANALYZE TABLE {table}")
                cursor.fetchall()


def test_the_shape_and_the_oldest_prunable_run() -> None:
    retention = policy({"COMPLETED": DAY, "FAILED": 10 * DAY, "CANCELLED": None})
    WorkflowRunFactory(id="c-5d", status="completed", finished_at=db_now() - 5 * DAY)
    WorkflowRunFactory(id="c-3d", status="completed", finished_at=db_now() - 3 * DAY)
    WorkflowRunFactory(id="f-7d", status="failed", finished_at=db_now() - 7 * DAY)  # kept
    WorkflowRunFactory(id="x-90d", status="cancelled", finished_at=db_now() - 90 * DAY)  # kept
    WorkflowRunFactory(id="t-2d", status="timed_out", finished_at=db_now() - 2 * DAY)
    WorkflowRunFactory(id="live", status="running", created_at=db_now() - 99 * DAY)
    for seq in range(1, 4):
        WorkflowEventFactory(run=WorkflowRun.objects.get(pk="c-5d"), seq=seq)
    EngineFactory()
    with CaptureQueriesContext(connection) as queries:
        result = summary(retention=retention)
    control = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT")
    statements = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(control)]
    assert len(statements) <= 6, statements
    assert set(result) == {"tables", "oldest_prunable", "prunable_runs", "prunable_capped"}
    oldest = result["oldest_prunable"]
    assert oldest["pk"] == oldest["workflow_id"] == "c-5d"
    assert oldest["status"] == "completed"
    expected = WorkflowRun.objects.get(pk="c-5d").finished_at
    assert abs((oldest["finished_at"] - expected).total_seconds()) < 0.001
    assert oldest["finished_at"].tzinfo is not None
    assert result["prunable_runs"] == 2  # c-5d, c-3d (timed_out keeps 30 days)
    assert result["prunable_capped"] is False
    tables = {row["table"]: row for row in result["tables"]}
    assert list(tables) == [model._meta.db_table for model in MODELS]
    for row in result["tables"]:
        assert isinstance(row["rows"], int)
        assert row["bytes"] is None if connection.vendor == "sqlite" else row["bytes"] > 0


def test_row_counts() -> None:
    for n in range(5):
        run = WorkflowRunFactory(id=f"r{n}")
        WorkflowEventFactory(run=run, seq=1)
        WorkflowEventFactory(run=run, seq=2)
    analyze()
    tables = {row["table"]: row["rows"] for row in summary()["tables"]}
    runs, events = WorkflowRun._meta.db_table, MODELS[1]._meta.db_table
    if connection.vendor == "mysql":  # InnoDB's TABLE_ROWS is a sampled estimate
        assert tables[runs] > 0 and tables[events] > 0
    else:
        assert (tables[runs], tables[events]) == (5, 10)


def test_nothing_prunable() -> None:
    WorkflowRunFactory(id="new", status="completed", finished_at=db_now())
    result = summary(retention=policy({"COMPLETED": DAY}))
    assert result["oldest_prunable"] is None
    assert result["prunable_runs"] == 0 and not result["prunable_capped"]
    everything_kept = policy(
        {key: None for key in ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")}
    )
    assert summary(retention=everything_kept)["oldest_prunable"] is None


def test_the_count_is_capped() -> None:
    old = db_now() - 30 * DAY
    WorkflowRun.objects.bulk_create(
        WorkflowRun(
            id=f"old-{n:05d}",
            workflow_name="w",
            status="completed",
            finished_at=old + timedelta(seconds=n),
        )
        for n in range(PRUNABLE_CAP + 5)
    )
    result = summary(retention=policy({"COMPLETED": DAY}))
    assert result["prunable_runs"] == PRUNABLE_CAP
    assert result["prunable_capped"] is True
    assert result["oldest_prunable"]["pk"] == "old-00000"
