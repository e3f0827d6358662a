"""Workflows of the flow-control tests (names start with ``tests.flow.``)."""

from __future__ import annotations

from typing import Any

from weft_django import Context, RetryAfter, RetryPolicy
from weft_django.runtime import registry
from weft_django.runtime.registry import WorkflowDefinition

#: Steers :func:`throttled_call`: how many times its step raises RetryAfter.
STATE: dict[str, Any] = {"retry_after": 0, "calls": 0}


def one_step(ctx: Context, value: int = 0) -> int:
    return int(ctx.step(lambda: value, name="only"))


def in_payments(ctx: Context) -> str:
    return str(ctx.step(lambda: "paid", name="pay"))


def pay_then_sleep(ctx: Context) -> str:
    ctx.step(lambda: "charged", name="charge")
    ctx.sleep(60)
    return str(ctx.step(lambda: "shipped", name="ship"))


def _call_provider() -> str:
    STATE["calls"] += 1
    if STATE["retry_after"] > 0:
        STATE["retry_after"] -= 1
        raise RetryAfter(30)
    return "ok"


def throttled_call(ctx: Context, attempts: int = 3) -> str:
    return str(ctx.step(_call_provider, name="call", retry=RetryPolicy(max_attempts=attempts)))


DEFINITIONS = (
    WorkflowDefinition("tests.flow.one_step", 1, one_step),
    WorkflowDefinition("tests.flow.in_payments", 1, in_payments, queue="payments"),
    WorkflowDefinition("tests.flow.throttled_call", 1, throttled_call),
    WorkflowDefinition("tests.flow.pay_then_sleep", 1, pay_then_sleep, queue="payments"),
)


def register() -> None:
    """Registered for the flow tests only (``in_payments`` names a queue that
    other tests' settings do not have: ``weft.E046`` there)."""
    for definition in DEFINITIONS:
        registry.register(definition)


def unregister() -> None:
    for definition in DEFINITIONS:
        registry.unregister(definition.name)
