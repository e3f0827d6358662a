"""A stopping worker's running turns: the shutdown grace, then a halt (docs/operations.md).

After SIGTERM (``Worker.stop()``) the worker takes no new claim and starts no
queued turn; the turns already running get ``--shutdown-grace`` seconds to end
on their own. Past it the engine is *halted*: each turn still running stops
at its next ``ctx`` operation (step, sleep, wait, ...), recording nothing
more and leaving its run resumable from its last checkpoint. A turn blocked
inside workflow code never reaches one: after :data:`HALT_WAIT` more seconds
the worker goes on without it (its claim is released with the others, or,
when that turn's open transaction holds the claim's lock, left to expire),
and the process exits with the thread still in that code.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from ..ownership import PASS_LOCK_WAIT, bounded_lock_wait
from ..runtime.engine import WorkflowEngine
from .logs import summarize
from .pool import TurnPool

logger = logging.getLogger("weft_django.worker")

#: Seconds the halted turns get to reach their next ``ctx`` operation.
HALT_WAIT = 1.0
#: How often the drain looks at the running turns.
POLL = 0.02


@dataclass
class Drained:
    """What the drain saw: how many turns ended on their own, the runs whose turn
    the halt stopped, and those whose turn was still running after it."""

    finished: int = 0
    halted: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)


def on_stop_signals(stop: Callable[[], None], grace: float) -> None:
    """SIGTERM and SIGINT call ``stop`` (main thread only); a second one exits at
    once with status 130, releasing nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    seen = 0

    def handle(signum: int, frame: Any) -> None:
        nonlocal seen
        seen += 1
        if seen > 1:
            logger.warning("second signal: exiting at once")
            os._exit(130)
        logger.info(
            "signal %s: shutting down gracefully; running turns get up to %gs (--shutdown-grace)",
            signal.Signals(signum).name,
            grace,
        )
        stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def _wait(engine: WorkflowEngine, deadline: float) -> None:
    while engine.in_flight and time.monotonic() < deadline:
        time.sleep(POLL)


def drain(engine: WorkflowEngine, pool: TurnPool, *, grace: float, since: float) -> Drained:
    """Let the running turns end within ``grace`` seconds of ``since`` (monotonic,
    when the stop was asked for), then halt the rest; returns what happened."""
    pool.close()  # queued turns never start
    running = engine.in_flight_ids()
    _wait(engine, since + grace)
    left = engine.in_flight_ids()
    result = Drained(finished=len(running - left))
    if not left:
        return result
    engine.halt()
    _wait(engine, time.monotonic() + HALT_WAIT)
    stuck = engine.in_flight_ids()
    result.halted = sorted(engine.halted_runs())
    result.stuck = sorted(stuck)
    result.finished += len(left - stuck) - len(result.halted)  # ended on their own meanwhile
    if result.halted:
        logger.info(
            "stopped %d turn(s) at their next operation after the %gs shutdown grace: %s "
            "(nothing more recorded; each resumes from its last checkpoint)",
            len(result.halted),
            grace,
            summarize(result.halted),
        )
    if result.stuck:
        logger.warning(
            "%d turn(s) did not reach a ctx operation within %gs of the end of the %gs "
            "shutdown grace (blocked inside workflow code): %s. The process exits without "
            "them; whatever they do from here is never recorded, and the worker that "
            "drives their run next runs the interrupted step again",
            len(result.stuck),
            HALT_WAIT,
            grace,
            summarize(result.stuck),
        )
    return result


def _release(engine: WorkflowEngine, blocked: bool) -> int:
    if not blocked:
        return engine.shutdown()
    # A blocked turn may hold its claim's lock in an open transaction (a
    # transactional step): the release must not wait for it. Past the bounded
    # wait nothing is released and the lease runs out instead.
    with transaction.atomic(using=engine.using), bounded_lock_wait(engine.using, PASS_LOCK_WAIT):
        return engine.shutdown()


def release_and_stop(engine: WorkflowEngine, *, blocked: bool) -> int | None:
    """Release every claim ``engine`` holds (epochs unchanged), mark it stopped and
    say so; ``blocked``: turns are still blocked in workflow code. Returns how many
    claims were released, None when that failed (logged)."""
    held = sorted(engine.ownership.claims.held)
    try:
        released = _release(engine, blocked)
    except Exception as exc:
        timing = engine.ownership.timing
        logger.warning(
            "weft worker %s stopped without releasing its claims (%s: %s); other workers "
            "take them over once its lease has run out, within CLAIM_TTL + 3 x "
            "CLAIM_RENEW_INTERVAL = %gs",
            engine.engine_id,
            type(exc).__name__,
            " ".join(str(exc).split()),
            timing.ttl + 3 * timing.renew_interval,
        )
        return None
    listed = f": {summarize(held)}" if released and len(held) == released else ""
    logger.info(
        "weft worker %s stopped; released %d claim(s)%s", engine.engine_id, released, listed
    )
    return released
