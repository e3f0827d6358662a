"""The demo's long workflow (``orders.long_delivery``) moves from one real worker to
the other when its holder is stopped, as ``bin/demo`` shows in the admin."""

from __future__ import annotations

import signal

import pytest

import weft_django as weft
from weft_django.models import Claim, WorkflowEvent

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_long_delivery_changes_hands_when_its_holder_stops(workers, wait) -> None:
    workers.start("a")
    workers.start("b")
    handle = weft.start("orders.long_delivery", 7, legs=12, leg_seconds=0.5, workflow_id="long-1")

    def held() -> tuple[str, int] | None:
        row = Claim.objects.filter(pk="long-1", holder__isnull=False).values_list(
            "holder_id", "epoch"
        )
        return row.first()

    first_holder, first_epoch = wait(held, 30, what="long-1 to be claimed")
    legs = WorkflowEvent.objects.filter(run_id="long-1", kind="step")
    wait(lambda: legs.count() >= 2, 30, what="two legs on the first worker")
    first = workers.by_engine(first_holder)
    first.send(signal.SIGTERM)
    assert first.wait(30) == 0, first.tail()

    def moved() -> tuple[str, int] | None:
        row = held()
        return row if row is not None and row[0] != first_holder else None

    second_holder, second_epoch = wait(moved, 30, what="long-1 to move to the other worker")
    assert second_epoch > first_epoch
    result = handle.result(timeout=60)
    pids = {leg.rsplit("@pid-", 1)[1] for leg in result["legs"]}
    assert len(result["legs"]) == 12 and len(pids) == 2, result
    owners = set(WorkflowEvent.objects.filter(run_id="long-1").values_list("engine_id", "epoch"))
    assert {engine for engine, _ in owners} == {first_holder, second_holder}
