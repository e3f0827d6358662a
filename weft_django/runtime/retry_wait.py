"""``weft.RetryAfter`` as a durable wait (docs/flow-control.md, "weft.RetryAfter").

When a step raises ``RetryAfter(seconds)`` with attempts left, ``ctx.step``
records a ``retry_wait`` event (its name the step's, its result the time and
the attempts made) and parks the run until then; the next attempt runs on
whichever worker wakes it. On replay the recorded waits give back the attempt
count, and the run parks again while the last wait is still on.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from django.utils.dateparse import parse_datetime

from .port import Park
from .replay import Replay

KIND = "retry_wait"


def _park(step_name: str, until: datetime) -> Park:
    return Park({"kind": KIND, "step": step_name, "until": until.isoformat()}, until)


def replay_waits(
    replay: Replay, step_name: str, now: Callable[[], datetime], before_park: Callable[[], object]
) -> int:
    """Replay this step's recorded waits: the attempts made so far (0: none).
    Raises :class:`~.port.Park` while the last wait is still on."""
    attempt, until = 0, None
    while True:
        event = replay.peek()
        if event is None or event.kind != KIND or event.name != step_name:
            break
        replay.advance()
        result = event.result or {}
        attempt = int(result.get("attempt", 0))
        until = parse_datetime(result["until"]) if result.get("until") else None
    if until is not None and replay.peek() is None and now() < until:
        before_park()
        raise _park(step_name, until)
    return attempt


def wait(
    replay: Replay,
    step_name: str,
    attempt: int,
    seconds: float,
    now: Callable[[], datetime],
    before_park: Callable[[], object],
) -> Park:
    """Record the wait after failed attempt ``attempt``; the Park to raise."""
    until = now() + timedelta(seconds=seconds)
    result = {"until": until.isoformat(), "attempt": attempt}
    replay.buffer.append(replay.new(KIND, step_name, result))
    before_park()
    return _park(step_name, until)
