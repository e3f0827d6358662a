"""Query plans in tests: PostgreSQL's ``EXPLAIN (FORMAT JSON)`` output, flattened."""

from __future__ import annotations

from typing import Any


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """``node`` and every node under it (its ``Plans``), depth first."""
    found = [node]
    for child in node.get("Plans", []):
        found += plan_nodes(child)
    return found
