"""Fixtures for the runtime tests: engines, a driver, and history readers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from example_project.orders.models import StepLog
from weft_django.models import Claim, Engine, WorkflowEvent
from weft_django.ownership.clock import db_now
from weft_django.runtime.engine import WorkflowEngine

from . import workflows


@pytest.fixture(autouse=True)
def _reset_workflow_state() -> Iterator[None]:
    workflows.reset()
    yield
    workflows.reset()


def history(run_id: str) -> list[tuple[int, str, str, str, int]]:
    """``(seq, kind, name, engine_id, epoch)`` of every recorded event, in order."""
    return list(
        WorkflowEvent.objects.filter(run_id=run_id)
        .order_by("seq")
        .values_list("seq", "kind", "name", "engine_id", "epoch")
    )


def kinds(run_id: str) -> list[tuple[str, str]]:
    return [(kind, name) for _seq, kind, name, _engine, _epoch in history(run_id)]


def steplog(run_id: str) -> list[str]:
    return list(StepLog.objects.filter(run_id=run_id).order_by("id").values_list("step", flat=True))


def claim_of(run_id: str) -> tuple[int, str | None]:
    """``(epoch, holder_id)`` of the run's claim row."""
    return Claim.objects.values_list("epoch", "holder_id").get(workflow_id=run_id)


def expire_lease(engine: WorkflowEngine) -> None:
    """Make ``engine`` look crashed: its lease ended an hour ago on the database clock."""
    Engine.objects.filter(id=engine.engine_id).update(
        lease_expires_at=db_now() - timedelta(hours=1)
    )
