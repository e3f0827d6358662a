"""The signal and update polls' probes: what they find, and that their cost
follows what is buffered or pending, not the runs an engine holds.

Before, both probes read every held run (``pk IN`` chunks of 2,000): about
19 ms (signals) and 7 ms (updates) per 1,000 held runs per pass on
PostgreSQL, every renew interval, on each worker. Over a 100,000-run burst
that grew to seconds per pass and the parking rate fell by half as the
parked runs accumulated. The plan tests load 20,000 held parked runs in bulk
and explain the probes before any ANALYZE.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django.models import Claim, UpdateRequest, WorkflowRun, WorkflowSignal
from weft_django.ownership.passes.signal_poll import held_with_buffered_signal, signal_stranded
from weft_django.ownership.passes.update_poll import held_with_pending_updates, update_stranded

from ..factories import (
    EngineFactory,
    UpdateRequestFactory,
    WorkflowRunFactory,
    WorkflowSignalFactory,
)
from ..plans import load_held_parked, plan_nodes

HELD = 20_000


def _no_list() -> list[str]:
    raise AssertionError("a database with partial indexes never lists the held runs")


def _held(engine: Any) -> Any:
    """``held=`` for a probe: the runs ``engine`` holds, read from its claims (the
    fallback of a database without partial indexes)."""
    if connection.features.supports_partial_indexes:
        return _no_list
    return lambda: sorted(
        Claim.objects.filter(holder_id=engine.id).values_list("workflow_id", flat=True)
    )


@pytest.mark.django_db
def test_the_signal_probe_finds_held_runs_waiting_on_a_buffered_signal_of_their_name() -> None:
    mine, other = EngineFactory(), EngineFactory()
    waiting = {"waiting_on": {"kind": "signal", "name": "go"}}
    for run_id in ("b-due", "a-due", "consumed", "other-name", "nothing", "timer"):
        WorkflowRunFactory(id=run_id, waiting=True, claim=mine, **waiting)
    WorkflowRunFactory(id="others", waiting=True, claim=other, **waiting)
    WorkflowRunFactory(id="unheld", waiting=True, claim=True, **waiting)
    WorkflowRunFactory(id="running", running=True, claim=mine)
    for run_id in ("b-due", "a-due", "others", "unheld", "running"):
        WorkflowSignalFactory(run_id=run_id, name="go")
    WorkflowSignalFactory(run_id="a-due", name="go")  # two buffered: listed once
    WorkflowSignalFactory(run_id="consumed", name="go", consumed=True)
    WorkflowSignalFactory(run_id="other-name", name="stop")
    WorkflowRun.objects.filter(pk="timer").update(waiting_on={"kind": "sleep"})
    WorkflowSignalFactory(run_id="timer", name="go")

    assert held_with_buffered_signal(mine.id, ["t.wf"], held=_held(mine)) == ["a-due", "b-due"]
    assert held_with_buffered_signal(other.id, ["t.wf"], held=_held(other)) == ["others"]
    # The global lease holds every started run of the registered types.
    if connection.features.supports_partial_indexes:
        names = [WorkflowRun.objects.get(pk="a-due").workflow_name]
        assert held_with_buffered_signal(None, names, held=_no_list) == [
            "a-due",
            "b-due",
            "others",
            "unheld",
        ]
        assert held_with_buffered_signal(None, ["another.type"], held=_no_list) == []
    name = WorkflowRun.objects.get(pk="a-due").workflow_name
    assert signal_stranded([name], limit=10) == [
        (run_id, name) for run_id in ("a-due", "b-due", "others", "unheld")
    ]
    assert signal_stranded([name], limit=2) == [("a-due", name), ("b-due", name)]


@pytest.mark.django_db
def test_the_update_probe_finds_held_runs_with_a_pending_request() -> None:
    mine, other = EngineFactory(), EngineFactory()
    for run_id in ("u-2", "u-1", "applied", "nothing"):
        WorkflowRunFactory(id=run_id, waiting=True, claim=mine)
    WorkflowRunFactory(id="others", waiting=True, claim=other)
    WorkflowRunFactory(id="ended", completed=True)
    for run_id in ("u-2", "u-1", "u-1", "others", "ended"):
        UpdateRequestFactory(run_id=run_id)
    UpdateRequestFactory(run_id="applied", applied=True)

    assert held_with_pending_updates(mine.id, [], held=_held(mine)) == ["u-1", "u-2"]
    assert held_with_pending_updates(other.id, [], held=_held(other)) == ["others"]
    name = WorkflowRun.objects.get(pk="u-1").workflow_name
    if connection.features.supports_partial_indexes:
        found = held_with_pending_updates(None, [name], held=_no_list)
        assert found == ["others", "u-1", "u-2"]  # started runs only
    assert [row[0] for row in update_stranded([name], limit=10)] == ["others", "u-1", "u-2"]


def _load_held_parked(engine_id: str) -> None:
    """HELD waiting runs held by ``engine_id`` (no ANALYZE); three of them with a
    buffered signal and a pending update."""
    load_held_parked(engine_id, HELD)
    for n in (17, 4_000, 19_999):
        WorkflowSignalFactory(run_id=f"p-{n}", name="go")
        UpdateRequestFactory(run_id=f"p-{n}")


def _explained(sql: str) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    return plan_nodes(plan[0]["Plan"])


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("probe", "table", "index"),
    [
        (held_with_buffered_signal, WorkflowSignal, "weft_signal_unconsumed_idx"),
        (held_with_pending_updates, UpdateRequest, "weft_update_pending_idx"),
    ],
)
def test_postgresql_probes_start_from_the_buffered_rows_not_the_held_runs(
    db: None, probe: Any, table: Any, index: str
) -> None:
    engine = EngineFactory()
    _load_held_parked(engine.id)
    with CaptureQueriesContext(connection) as queries:
        found = probe(engine.id, ["t.wf"], held=_no_list)
    assert found == ["p-17", "p-19999", "p-4000"]
    assert len(queries.captured_queries) == 1
    scans = [n for n in _explained(queries.captured_queries[0]["sql"]) if n.get("Relation Name")]
    shown = [(n["Node Type"], n["Relation Name"], n.get("Index Name")) for n in scans]
    # Driven by the partial index of the buffered rows; each run and claim by key.
    assert (scans[0]["Relation Name"], scans[0].get("Index Name")) == (table._meta.db_table, index)
    assert all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in scans), shown
