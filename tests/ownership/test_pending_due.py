"""The rule "pending and due" has one home: ``pending_due_filter`` (the ORM) and its SQL
twin ``pending_due_sql`` (the intake's hand-written window) select the same runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from weft_django.models import RunStatus, WorkflowRun
from weft_django.ownership import pending_due, pending_due_filter
from weft_django.ownership.claims.intake import ready_window
from weft_django.ownership.clock import db_now
from weft_django.ownership.passes.scans import pending_due_sql

pytestmark = pytest.mark.django_db

STARTS = {"none": None, "past": -60.0, "now": 0.0, "future": 60.0}
STATUSES = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.COMPLETED)
DUE = {"pending-none", "pending-past", "pending-now"}


@pytest.fixture
def now():
    now = db_now().replace(microsecond=0)  # SQLite stores what it is given: keep it exact
    WorkflowRun.objects.bulk_create(
        WorkflowRun(
            id=f"{status}-{start}",
            workflow_name="t.wf",
            status=status,
            start_at=None if offset is None else now + timedelta(seconds=offset),
        )
        for status in STATUSES
        for start, offset in STARTS.items()
    )
    return now


def sql_ids(now) -> set[str]:
    quote = connection.ops.quote_name
    table = quote(WorkflowRun._meta.db_table)
    found: set[str] = set()
    for scheduled in (False, True):
        where = pending_due_sql(quote("status"), quote("start_at"), scheduled=scheduled)
        params = [connection.ops.adapt_datetimefield_value(now)] if scheduled else []
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {quote('id')} FROM {table} WHERE {where}", params)
            found.update(row[0] for row in cursor.fetchall())
    return found


def test_the_filter_and_its_sql_twin_agree(now) -> None:
    orm = set(WorkflowRun.objects.filter(pending_due_filter(now)).values_list("pk", flat=True))
    assert orm == DUE
    assert sql_ids(now) == DUE


def test_the_branches_of_the_sql_twin_do_not_overlap(now) -> None:
    quote = connection.ops.quote_name
    unscheduled = pending_due_sql(quote("status"), quote("start_at"), scheduled=False)
    scheduled = pending_due_sql(quote("status"), quote("start_at"), scheduled=True)
    table = quote(WorkflowRun._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {table} WHERE ({unscheduled}) AND ({scheduled})",
            [connection.ops.adapt_datetimefield_value(now)],
        )
        assert cursor.fetchone()[0] == 0


def test_the_scan_and_the_intake_window_use_the_rule(now) -> None:
    assert set(pending_due(now)) == DUE
    assert {c.run_id for c in ready_window(now, ["t.wf"], 10)} == DUE
