"""``manage.py weft_demo``: start a handful of example runs for a worker to drive."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

import weft_django as weft


class Command(BaseCommand):
    help = "Start example order workflows; then run 'manage.py weft_worker' to watch them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--orders", type=int, default=3, help="orders to fulfil directly")
        parser.add_argument("--approvals", type=int, default=3, help="orders needing approval")

    def handle(self, *args: Any, **options: Any) -> None:
        batch = uuid.uuid4().hex[:6]
        for number in range(options["orders"]):
            handle = weft.start(
                "orders.fulfil_order",
                1000 + number,
                9.99 + number,
                workflow_id=f"demo-{batch}-order-{number}",
            )
            self.stdout.write(f"started {handle.id} (orders.fulfil_order)")
        waiting = []
        for number in range(options["approvals"]):
            handle = weft.start(
                "orders.approve_order", 2000 + number, workflow_id=f"demo-{batch}-approval-{number}"
            )
            waiting.append(handle.id)
            self.stdout.write(f"started {handle.id} (orders.approve_order)")
        if waiting:
            handle = weft.start("orders.approver", waiting, workflow_id=f"demo-{batch}-approver")
            self.stdout.write(f"started {handle.id} (orders.approver)")
        self.stdout.write(
            self.style.SUCCESS(
                "Demo runs stored. Watch them progress in the worker's log, and in the admin "
                "(/admin/weft_django/) under 'workflow runs' and 'workflow claims'."
            )
        )
