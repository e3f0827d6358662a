"""Query plans in tests: PostgreSQL's ``EXPLAIN (FORMAT JSON)`` output, flattened,
and big tables loaded in bulk to explain against."""

from __future__ import annotations

from typing import Any

from django.db import connection

from weft_django.models import Claim, WorkflowRun


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """``node`` and every node under it (its ``Plans``), depth first."""
    found = [node]
    for child in node.get("Plans", []):
        found += plan_nodes(child)
    return found


def load_held_parked(engine_id: str, count: int, prefix: str = "p-") -> None:
    """``count`` runs ``p-0`` ... (``prefix``) of type ``t.wf`` waiting on the
    signal ``go``, held by ``engine_id`` at epoch 1: two INSERT ... SELECT
    statements, no ANALYZE (the statistics of a table right after a bulk load)."""
    run = connection.ops.quote_name(WorkflowRun._meta.db_table)
    claim = connection.ops.quote_name(Claim._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {run} (id, workflow_name, workflow_version, status, args, kwargs, "
            "parent_id, created_at, updated_at, waiting_on) "
            "SELECT %s || n, 't.wf', 1, 'waiting', '[]', '{}', '', now(), now(), "
            """'{"kind": "signal", "name": "go"}' FROM generate_series(0, %s) n""",
            [prefix, count - 1],
        )
        cursor.execute(
            f"INSERT INTO {claim} (workflow_id, epoch, holder_id, claimed_at) "
            "SELECT %s || n, 1, %s, now() FROM generate_series(0, %s) n",
            [prefix, engine_id, count - 1],
        )
