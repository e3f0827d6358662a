"""Example workflows, autodiscovered by weft_django: run ``bin/demo`` to watch them.

Step functions run once and log with a plain logger; the workflow bodies log
through ``ctx.logger``, which stays quiet while a run replays its history.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta

import weft_django as weft
from weft_django import Context, RetryPolicy, WaitTimeoutError

logger = logging.getLogger("weft_django.demo")


def reserve_stock(order_id: int) -> dict:
    logger.info("order %s: stock reserved", order_id)
    return {"order_id": order_id, "reserved": True}


def charge_card(order_id: int, amount: float) -> str:
    logger.info("order %s: charged %.2f", order_id, amount)
    return f"charge-{order_id}"


def ship(order_id: int) -> str:
    logger.info("order %s: shipped", order_id)
    return f"parcel-{order_id}"


@weft.workflow(name="orders.fulfil_order")
def fulfil_order(ctx: Context, order_id: int, amount: float = 10.0) -> dict:
    """Reserve, charge, wait a moment (a durable timer), ship."""
    ctx.step(reserve_stock, order_id)
    charge = ctx.step(charge_card, order_id, amount, retry=RetryPolicy(max_attempts=3))
    ctx.sleep(timedelta(seconds=2))
    parcel = ctx.step(ship, order_id)
    ctx.logger.info("order %s: done", order_id)
    return {"order_id": order_id, "charge": charge, "parcel": parcel}


@weft.workflow(name="orders.approve_order")
def approve_order(ctx: Context, order_id: int) -> dict:
    """Wait for a ``decision`` signal (sent by ``orders.approver``), then fulfil as a child."""
    ctx.step(reserve_stock, order_id)
    ctx.logger.info("order %s: waiting for a decision", order_id)
    try:
        decision = ctx.wait_for_signal("decision", timeout=timedelta(minutes=10))
    except WaitTimeoutError:
        ctx.logger.info("order %s: no decision, expired", order_id)
        return {"order_id": order_id, "status": "expired"}
    ctx.logger.info("order %s: decision %s", order_id, decision["status"])
    if decision["status"] != "approved":
        return {"order_id": order_id, "status": decision["status"]}
    child = ctx.start_child(
        "orders.fulfil_order", order_id, workflow_id=f"{ctx.workflow_id}/fulfil"
    )
    return {"order_id": order_id, "status": "approved", "fulfilment": child.result()}


def send_decision(workflow_id: str, status: str) -> None:
    weft.signal(workflow_id, "decision", {"status": status}, signal_id=f"decision-{workflow_id}")
    logger.info("approver: %s -> %s", workflow_id, status)


@weft.workflow(name="orders.approver")
def approver(ctx: Context, workflow_ids: list[str]) -> int:
    """Approve each order a second apart: signals sent from inside a workflow step."""
    for index, workflow_id in enumerate(workflow_ids):
        ctx.sleep(1)
        status = "approved" if index % 3 != 2 else "rejected"
        ctx.step(send_decision, workflow_id, status, name=f"decide:{workflow_id}")
    return len(workflow_ids)


@weft.workflow(name="orders.cart")
def cart(ctx: Context, customer: str) -> dict:
    """A shopping cart: items arrive as updates, ``total`` is a query, checkout is a signal."""
    items: list[dict] = []

    def check_item(item: dict) -> None:
        if not isinstance(item, dict) or item.get("qty", 0) <= 0:
            raise ValueError("an item needs a positive 'qty'")

    @ctx.on_update("add_item", validator=check_item)
    def add_item(item: dict) -> int:
        items.append(item)
        return len(items)

    @ctx.on_query("total")
    def total() -> float:
        return sum(item["qty"] * item.get("price", 0) for item in items)

    ctx.wait_for_signal("checkout", timeout=timedelta(hours=1))
    ctx.logger.info("cart of %s checked out with %d item(s)", customer, len(items))
    return {"customer": customer, "items": items, "total": total()}


def deliver_leg(order_id: int, leg: int) -> str:
    logger.info("order %s: delivery leg %d done (pid %d)", order_id, leg, os.getpid())
    return f"leg-{leg}@pid-{os.getpid()}"


@weft.workflow(name="orders.long_delivery")
def long_delivery(ctx: Context, order_id: int, legs: int = 12, leg_seconds: float = 5.0) -> dict:
    """A delivery of ``legs`` legs, ``leg_seconds`` apart (a minute by default): long
    enough for ``bin/demo`` to stop the worker holding it and show the claim moving
    to the other worker (epoch 2) in the admin, with the run carrying on there."""
    done = []
    for leg in range(1, legs + 1):
        done.append(ctx.step(deliver_leg, order_id, leg, name=f"leg-{leg}"))
        if leg < legs:
            ctx.sleep(timedelta(seconds=leg_seconds))
    ctx.logger.info("order %s: delivered in %d legs", order_id, legs)
    return {"order_id": order_id, "legs": done}
