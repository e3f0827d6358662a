"""Per-workflow anti-thrash cooldown after a lost claim (DESIGN.md §4.3).

Exponential from the renew interval, capped at 4 x TTL, cleared on a
successful acquire or takeover. It is local to one engine, so it runs on the
engine's monotonic clock: it never judges liveness, only when to try again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Cooldown:
    def __init__(
        self,
        *,
        base: float,
        cap: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base = base
        self.cap = cap
        self.clock = clock
        self._lock = threading.Lock()
        self._losses: dict[str, int] = {}
        self._until: dict[str, float] = {}

    def delay_for(self, losses: int) -> float:
        """Cooldown length after the ``losses``-th consecutive loss (1-based)."""
        if losses <= 0:
            return 0.0
        return min(self.base * (2 ** (losses - 1)), self.cap)

    def record_loss(self, workflow_id: str) -> float:
        with self._lock:
            losses = self._losses.get(workflow_id, 0) + 1
            self._losses[workflow_id] = losses
            until = self.clock() + self.delay_for(losses)
            self._until[workflow_id] = until
            return until

    def blocked_until(self, workflow_id: str) -> float | None:
        """When the cooldown ends, or None when the workflow may be tried now."""
        with self._lock:
            until = self._until.get(workflow_id)
            if until is None or self.clock() >= until:
                return None
            return until

    def clear(self, workflow_id: str) -> None:
        with self._lock:
            self._losses.pop(workflow_id, None)
            self._until.pop(workflow_id, None)

    def __len__(self) -> int:
        return len(self._until)
