"""The renewal loop's passes for one engine (docs/ownership.md, "The renewal loop").

:class:`EnginePasses` composes, for a host that drives turns on its own
executor, the four passes in their order (renew, reclaim, signal poll,
update poll) plus the timeout sweep, each through the engine's ownership
strategy; every pass returns a :class:`~weft_django.ownership.passes.outcomes.PassResult`
and is counted in the metrics. Passes only *schedule* turns (``submit``):
none drives a run on the thread it runs on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ...ownership import PassResult, metrics, record_passes, signal_poll_pass, update_poll_pass
from .. import registry
from ..engine import WorkflowEngine
from ..inbox import purge_expired_updates
from ..runs import expire_timed_out

logger = logging.getLogger("weft_django.worker")


class EnginePasses:
    """The passes of ``engine``, scheduling turns through ``submit``.

    ``submit(run_id)`` queues one turn and returns whether it did; ``busy(run_id)``
    says whether a turn of the run is queued or running already.
    """

    def __init__(
        self,
        engine: WorkflowEngine,
        *,
        submit: Callable[[str], bool],
        busy: Callable[[str], bool],
    ) -> None:
        self.engine = engine
        self.ownership = engine.ownership
        self.submit = submit
        self.busy = busy
        self._last: dict[str, PassResult] = {}
        self._lock = threading.Lock()

    def keep(self, result: PassResult) -> None:
        """Remember ``result`` as the last of its pass (compacted: counts only
        when it covers many runs)."""
        result = result.compact()
        with self._lock:
            self._last[result.name] = result

    def last(self) -> dict[str, PassResult]:
        with self._lock:
            return dict(self._last)

    def record(self) -> None:
        """Store the last summary of each pass on the engine row (the admin shows it)."""
        engine_id = self.engine.engine_id
        summaries = {name: result.summary(engine_id) for name, result in self.last().items()}
        record_passes(engine_id, summaries, using=self.engine.using)

    def _observed(self, result: PassResult) -> PassResult:
        metrics.observe_pass(result)
        return result

    def renew(self) -> PassResult:
        """Pass 1: this engine's leases (every claim it holds rides on them)."""
        return self._observed(self.ownership.renew())

    def reclaim(self) -> PassResult:
        """Pass 2: the mode's recovery of runs other engines left behind."""
        return self._observed(self.ownership.recover(registry.served(), self.submit, self.busy))

    def signal_poll(self) -> PassResult:
        """Pass 3: wake held runs whose awaited signal is buffered."""
        now = self.engine.now()
        held = self.ownership.held_count()
        wakeable = self.ownership.held_with_buffered_signal(registry.served())
        return self._observed(signal_poll_pass(wakeable, held=held, wake=self._wake, now=now))

    def _wake(self, run_id: str) -> None:
        if self.ownership.check_wake(run_id, "signal"):
            self.submit(run_id)

    def update_poll(self) -> PassResult:
        """Pass 4: schedule a turn of every held run with pending update requests."""
        return self._observed(update_poll_pass(self, clock=self.engine.now))

    # The update poll's target (weft_django.ownership.passes.update_poll.UpdatePollTarget).

    def held_count(self) -> int:
        return self.ownership.held_count()

    def held_with_pending_updates(self) -> list[str]:
        return self.ownership.held_with_pending_updates(registry.served())

    def drain_updates(self, run_id: str) -> None:
        """The drain itself happens in the run's next turn, at its park point."""
        if self.engine.stopping.is_set():
            raise RuntimeError("the engine is stopping")
        if not self.ownership.check_wake(run_id, "update"):
            raise RuntimeError(f"{run_id} is no longer held by this engine")
        if not (self.submit(run_id) or self.busy(run_id)):
            raise RuntimeError(f"could not schedule a turn of {run_id}")

    def timeouts(self) -> None:
        """Runs past their execution timeout, and update answers past their TTL."""
        expire_timed_out(using=self.engine.using)
        purge_expired_updates(using=self.engine.using)
