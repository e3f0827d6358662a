"""Pass results of the renewal loop (DESIGN.md §4.4): times, per-run outcomes, counts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class PassResult:
    """What one pass did. ``outcomes`` keeps iteration order (run id -> outcome)."""

    name: str
    started_at: datetime
    finished_at: datetime | None = None
    outcomes: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def record(self, run_id: str, outcome: str, error: BaseException | None = None) -> None:
        self.outcomes[run_id] = outcome
        if error is not None:
            self.errors[run_id] = f"{type(error).__name__}: {error}"

    @property
    def counts(self) -> Counter[str]:
        return Counter(self.outcomes.values())

    def count(self, outcome: str) -> int:
        return self.counts.get(outcome, 0)

    @property
    def seconds(self) -> float:
        if self.finished_at is None:
            return 0.0
        return (self.finished_at - self.started_at).total_seconds()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able summary."""
        return {
            "pass": self.name,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "outcomes": dict(self.outcomes),
            "errors": dict(self.errors),
            "counts": dict(self.counts),
        }
