"""The overview's runs nobody can serve: active runs of a workflow version no
live engine has registered (docs/deploying-code.md).

Every engine row records the workflows it serves (``Engine.workflows``,
``name -> versions``). The overview reads the live engines' (one query),
then counts the active runs whose ``(workflow_name, workflow_version)`` pair
none of them serves, per pair, over at most :data:`UNSERVED_CAP` such runs
(one query reading two columns of at most that many rows), so a pair is shown
as "shop.order v1: 12 runs, no live worker has this version" instead of its
runs waiting unexplained. Without any live engine the section is empty (the
engines section already says there is none).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from ..models import ACTIVE_STATUSES, WorkflowRun

#: Unserved runs counted before a pair's count says "N+".
UNSERVED_CAP = 1_000


@dataclass(frozen=True)
class Unserved:
    """Active runs of one (name, version) pair that no live engine serves."""

    workflow_name: str
    workflow_version: int
    count: int
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


def unserved_runs(
    runs: QuerySet[WorkflowRun], live_workflows: list[Any], *, cap: int = UNSERVED_CAP
) -> list[Unserved]:
    """Per (name, version) pair of active runs no live engine serves: how many."""
    if not live_workflows:
        return []
    served = served_pairs(live_workflows)
    condition = Q()
    for name, versions in served.items():
        condition |= Q(workflow_name=name, workflow_version__in=sorted(versions))
    active = runs.filter(status__in=ACTIVE_STATUSES)
    if served:
        active = active.exclude(condition)
    # Two short columns of at most ``cap`` rows, counted here (MariaDB has no
    # LIMIT inside an IN subquery to group them in the database).
    counted = Counter(active.order_by().values_list("workflow_name", "workflow_version")[:cap])
    capped = sum(counted.values()) >= cap
    return [
        Unserved(name, version, n, capped, tuple(sorted(served.get(name, ()))))
        for (name, version), n in sorted(counted.items())
    ]
