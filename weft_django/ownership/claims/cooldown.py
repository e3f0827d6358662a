"""Per-workflow anti-thrash cooldown after a lost claim (docs/ownership.md).

Exponential from the renew interval, capped at 4 x TTL. A successful acquire
or takeover clears the window; the curve itself resets only once the claim
survives a renewal, so a workflow that thrashes backs off further each time.
It is local to one engine, so it runs on the engine's monotonic clock: it
never judges liveness, only when to try again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Container


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
        """A successful acquire/takeover ends the cooldown window.

        The loss count survives until the claim proves stable (``forgive``), so
        a workflow that keeps being won and lost backs off exponentially.
        """
        with self._lock:
            self._until.pop(workflow_id, None)

    def forgive(self, held: Container[str], *, exclude: Container[str] = ()) -> None:
        """Reset the curve of every workflow in ``held`` but not in ``exclude``
        (its claim survived a renewal). Costs O(workflows with losses)."""
        with self._lock:
            if not self._losses:
                return
            for workflow_id in [w for w in self._losses if w in held and w not in exclude]:
                del self._losses[workflow_id]
                self._until.pop(workflow_id, None)

    def losses(self, workflow_id: str) -> int:
        with self._lock:
            return self._losses.get(workflow_id, 0)

    def __len__(self) -> int:
        return len(self._until)
