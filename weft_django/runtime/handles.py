"""What ``ctx`` operations hand back to workflow code: updates, child handles, a logger."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .replay import Replay


class Update:
    """An update request handed to ``ctx.wait_for_update``."""

    def __init__(
        self,
        responder: Callable[[Update, Any], None],
        name: str,
        update_id: str,
        payload: Any,
    ) -> None:
        self._responder = responder
        self.name = name
        self.update_id = update_id
        self.payload = payload

    def respond(self, value: Any = None) -> None:
        """Answer the caller (effective once; a replayed or repeated call is a no-op)."""
        self._responder(self, value)

    def __repr__(self) -> str:
        return f"<Update {self.name!r} {self.update_id!r}>"


@dataclass
class ChildHandle:
    """A child workflow started with ``ctx.start_child``.

    ``id`` is the child run's id: what ``weft.signal``, ``weft.describe`` and the
    other verbs take. It is the same on every replay of the parent.
    """

    id: str
    """The child run's id (``workflow_id``, or ``"<parent id>/child-<seq>"``)."""
    _waiter: Callable[[str, float | timedelta | None], Any] = field(repr=False)

    def result(self, timeout: float | timedelta | None = None) -> Any:
        """Durably wait for the child's terminal state (reached on any worker)."""
        return self._waiter(self.id, timeout)


class ReplayAwareLogger(logging.LoggerAdapter):
    """``ctx.logger``: quiet while the run replays recorded history."""

    def __init__(self, replay: Replay, workflow_name: str) -> None:
        super().__init__(logging.getLogger(f"weft_django.workflow.{workflow_name}"), {})
        self.replay = replay

    def isEnabledFor(self, level: int) -> bool:
        return not self.replay.is_replaying and self.logger.isEnabledFor(level)

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"[{self.replay.workflow_id}] {msg}", kwargs
