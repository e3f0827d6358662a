"""The overview's runs nobody can serve: active runs of a workflow version no
live engine has registered (docs/deploying-code.md).

Every engine row records the workflows it serves (``Engine.workflows``,
``name -> versions``); the overview has the live engines' rows already. The
active runs are sampled in one statement of bounded cost, whatever the size
of the table: per active status, the :data:`SAMPLE` oldest and the
:data:`SAMPLE` newest runs, each leg a walk of ``weft_run_status_created_idx``
(``status, created_at, id``) that stops at its ``LIMIT`` (runs of a retired
version are the oldest, runs of a version started before its workers were
deployed the newest). The runs of the sample whose ``(workflow_name,
workflow_version)`` pair no live engine serves are counted per pair: exactly
when the sample held every active run of their status, else as "N+" (at
least). So "shop.order v1: 12 runs, no live worker has this version" is
shown instead of runs waiting unexplained. Without any live engine the
section is empty (the engines section already says there is none).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connections

from ..models import ACTIVE_STATUSES, WorkflowRun

#: Runs read per active status from each end of its queue.
SAMPLE = 500


@dataclass(frozen=True)
class Unserved:
    """Active runs of one (name, version) pair that no live engine serves."""

    workflow_name: str
    workflow_version: int
    count: int
    #: True: the count is a lower bound (the sample did not hold every active run).
    capped: bool
    #: The versions of this name live engines do serve (may be empty).
    served_versions: tuple[int, ...]

    def __str__(self) -> str:
        runs = f"{self.count}+" if self.capped else str(self.count)
        return (
            f"{self.workflow_name} v{self.workflow_version}: {runs} runs, "
            "no live worker has this version"
        )


def served_pairs(workflows: Iterable[Any]) -> dict[str, set[int]]:
    """The union of engines' ``workflows`` fields (``name -> versions``)."""
    served: dict[str, set[int]] = {}
    for mapping in workflows:
        if not isinstance(mapping, dict):
            continue  # undecodable or missing: serves nothing known
        for name, versions in mapping.items():
            if isinstance(versions, list):
                served.setdefault(name, set()).update(v for v in versions if isinstance(v, int))
    return served


def sample_statement(connection: Any, sample: int) -> tuple[str, list[Any]]:
    """The bounded sample of active runs: (status, id, name, version) rows."""
    quote = connection.ops.quote_name
    table = quote(WorkflowRun._meta.db_table)
    status, created, run_id = quote("status"), quote("created_at"), quote("id")
    columns = f"{status}, {run_id}, {quote('workflow_name')}, {quote('workflow_version')}"
    legs, params = [], []
    for index, (state, direction) in enumerate(
        (state, direction) for state in ACTIVE_STATUSES for direction in ("ASC", "DESC")
    ):
        legs.append(
            f"SELECT * FROM (SELECT {columns} FROM {table} WHERE {status} = %s "
            f"ORDER BY {created} {direction}, {run_id} {direction} LIMIT %s) s{index}"
        )
        params += [str(state), sample]
    return " UNION ALL ".join(legs), params


def unserved_runs(live_workflows: list[Any], *, using: str, sample: int = SAMPLE) -> list[Unserved]:
    """Per (name, version) pair of sampled active runs no live engine serves: how many."""
    if not live_workflows:
        return []
    served = served_pairs(live_workflows)
    connection = connections[using]
    sql, params = sample_statement(connection, sample)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    per_status = Counter(row[0] for row in rows)
    seen: dict[str, tuple[str, str, int]] = {row[1]: (row[0], row[2], row[3]) for row in rows}
    counted: Counter[tuple[str, int]] = Counter()
    partial: set[tuple[str, int]] = set()
    for state, name, version in seen.values():
        if version in served.get(name, ()):
            continue
        counted[(name, version)] += 1
        if per_status[state] >= 2 * sample:  # the sample did not hold them all
            partial.add((name, version))
    return [
        Unserved(name, version, n, (name, version) in partial, tuple(sorted(served.get(name, ()))))
        for (name, version), n in sorted(counted.items())
    ]
