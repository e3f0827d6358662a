"""Workflows of the update and query tests (every name starts with ``tests.updates.``).

Handlers count their calls in :data:`CALLS` (replays included), so a test can
tell a re-applied update from a first application; ``STATE`` steers a few of
them (``STATE["block"]``: a callable a step runs, to act "from another
process" while the owner is mid-turn). The autouse fixture in ``conftest.py``
resets both around every test.

Worker processes load this module too: ``tests.updates.worker_settings``
installs ``tests.updates`` as an app, whose ``workflows`` module weft_django
autodiscovers. So nothing here may depend on pytest.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import weft_django as weft
from weft_django import Context, PayloadError, WaitTimeoutError

CALLS: Counter[str] = Counter()
LOG: list[Any] = []
STATE: dict[str, Any] = {}


def reset() -> None:
    CALLS.clear()
    LOG.clear()
    STATE.clear()


def positive_int(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"amount must be a positive int, got {value!r}")


def mark(label: str) -> str:
    """A step: runs ``STATE["block"]`` (once) if set, then returns ``label``."""
    action: Callable[[], Any] | None = STATE.pop("block", None)
    if action is not None:
        action()
    return label


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _register_counter(ctx: Context, items: list[int]) -> None:
    @ctx.on_update("add", validator=positive_int)
    def add(amount: int) -> dict[str, Any]:
        CALLS["add"] += 1
        items.append(amount)
        return {"total": sum(items), "count": len(items), "pid": os.getpid()}

    @ctx.on_update("explode")
    def explode(payload: Any) -> None:
        CALLS["explode"] += 1
        raise RuntimeError(f"handler exploded on {payload!r}")

    @ctx.on_update("repeat")
    def repeat(payload: Any) -> list[Any]:
        return [payload] * 10

    @ctx.on_query("total")
    def total() -> int:
        return sum(items)

    @ctx.on_query("items")
    def listed(*args: Any) -> dict[str, Any]:
        return {"items": list(items), "args": list(args)}

    @ctx.on_query("boom")
    def boom() -> None:
        raise KeyError("boom")


@weft.workflow(name="tests.updates.counter")
def counter(ctx: Context, signal: str = "done") -> dict[str, Any]:
    """``add`` (validated positive int) sums amounts; waits for ``signal``."""
    items: list[int] = []
    _register_counter(ctx, items)
    got = ctx.wait_for_signal(signal)
    return {"items": items, "total": sum(items), "signal": got}


@weft.workflow(name="tests.updates.counter_steps")
def counter_steps(ctx: Context) -> dict[str, Any]:
    """The counter with a step before its wait (``STATE["block"]`` runs inside it)."""
    items: list[int] = []
    _register_counter(ctx, items)
    first = ctx.wait_for_signal("first")
    ctx.step(mark, "between", name="between")
    second = ctx.wait_for_signal("second")
    return {"items": items, "signals": [first, second]}


@weft.workflow(name="tests.updates.late_handler")
def late_handler(ctx: Context) -> dict[str, Any]:
    """No handler until signal ``arm`` arrives; then ``add`` (validated) and wait for ``done``."""
    ctx.wait_for_signal("arm")
    items: list[int] = []

    @ctx.on_update("add", validator=positive_int)
    def add(amount: int) -> int:
        items.append(amount)
        return sum(items)

    ctx.wait_for_signal("done")
    return {"items": items}


@weft.workflow(name="tests.updates.sleepy")
def sleepy(ctx: Context, seconds: float) -> dict[str, Any]:
    """The counter around a durable timer: updates are applied while it sleeps."""
    items: list[int] = []
    _register_counter(ctx, items)
    ctx.sleep(seconds)
    return {"items": items}


@weft.workflow(name="tests.updates.approval")
def approval(ctx: Context, timeout: float | None = None, respond_twice: bool = False) -> Any:
    """``wait_for_update("approve")``, respond, then wait for signal ``finish``."""
    try:
        request = ctx.wait_for_update("approve", timeout=timeout)
    except WaitTimeoutError:
        return {"timed_out": True}
    CALLS["approve_received"] += 1
    request.respond({"approved": request.payload, "update_id": request.update_id})
    if respond_twice:
        request.respond("second answer")
    ctx.wait_for_signal("finish")
    return {"approved": request.payload}


@weft.workflow(name="tests.updates.respond_retry")
def respond_retry(ctx: Context) -> Any:
    """The first ``respond`` is not JSON (PayloadError, caught); the second answers."""
    request = ctx.wait_for_update("approve")
    try:
        request.respond({"not json": object()})
    except PayloadError as exc:
        LOG.append(type(exc).__name__)
        request.respond({"fallback": request.payload})
    return "done"


@weft.workflow(name="tests.updates.cart")
def cart(ctx: Context) -> dict[str, Any]:
    """Items arrive through handler ``add``; ``checkout`` is a ``wait_for_update``."""
    items: list[Any] = []

    @ctx.on_update("add")
    def add(item: Any) -> int:
        items.append(item)
        return len(items)

    @ctx.on_query("items")
    def listed() -> list[Any]:
        return list(items)

    checkout = ctx.wait_for_update("checkout")
    checkout.respond({"items": list(items), "note": checkout.payload})
    return {"items": items}


@weft.workflow(name="tests.updates.until")
def until(ctx: Context, target: int, timeout: float | None = None) -> dict[str, Any]:
    """``wait_until(n == target)``; ``inc`` adds its payload to n."""
    state = {"n": 0, "checks": 0}

    @ctx.on_update("inc")
    def inc(amount: int) -> int:
        state["n"] += amount
        return state["n"]

    @ctx.on_query("n")
    def current() -> int:
        return state["n"]

    def reached() -> bool:
        state["checks"] += 1
        return state["n"] == target

    ok = ctx.wait_until(reached, timeout=timeout)
    after = ctx.wait_for_signal("after") if STATE.get("wait_after") else None
    return {"reached": ok, "n": state["n"], "after": after}


@weft.workflow(name="tests.updates.slow_handler")
def slow_handler(ctx: Context, seconds: float = 0.0) -> dict[str, Any]:
    """``add`` sleeps ``seconds`` (a window to kill the owner mid-update)."""
    items: list[int] = []

    @ctx.on_update("add")
    def add(amount: int) -> dict[str, Any]:
        time.sleep(seconds)
        items.append(amount)
        return {"total": sum(items), "pid": os.getpid()}

    @ctx.on_query("total")
    def total() -> int:
        return sum(items)

    ctx.wait_for_signal("done")
    return {"items": items}


@weft.workflow(name="tests.updates.stepper")
def stepper(ctx: Context) -> dict[str, Any]:
    """A query handler over step results; a slow step (``nap``) between two waits."""
    seen: list[str] = []

    @ctx.on_query("seen")
    def listed() -> list[str]:
        return list(seen)

    seen.append(ctx.step(mark, "one", name="one"))
    seconds = ctx.wait_for_signal("nap")
    ctx.step(nap, seconds, name="nap")
    seen.append(ctx.step(mark, "two", name="two"))
    ctx.wait_for_signal("done")
    return {"seen": seen}
