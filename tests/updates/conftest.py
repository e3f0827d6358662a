"""Fixtures of the update and query tests: engines, a driver, request helpers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import weft_django as weft
from weft_django import UpdateTimeoutError
from weft_django.api.updates import wait_for_response
from weft_django.models import Engine, UpdateRequest, WorkflowEvent
from weft_django.ownership.clock import db_now
from weft_django.runtime.engine import WorkflowEngine

from . import workflows


@pytest.fixture(autouse=True)
def _reset_workflow_state() -> Iterator[None]:
    workflows.reset()
    yield
    workflows.reset()


def send(workflow_id: str, name: str, payload: Any = None, *, update_id: str | None = None) -> str:
    """Store an update without waiting for its answer (``timeout=0``); its update_id."""
    with pytest.raises(UpdateTimeoutError) as caught:
        weft.update(workflow_id, name, payload, timeout=0, update_id=update_id)
    if update_id is not None:
        assert caught.value.update_id == update_id
    return caught.value.update_id


def answer(workflow_id: str, update_id: str) -> Any:
    """The stored answer of an update (raises what ``update()`` would raise)."""
    return wait_for_response(workflow_id, update_id, timeout=0)


def kinds(run_id: str) -> list[tuple[str, str]]:
    return list(
        WorkflowEvent.objects.filter(run_id=run_id).order_by("seq").values_list("kind", "name")
    )


def update_events(run_id: str) -> list[dict[str, Any]]:
    """The ``result`` of each recorded ``update`` event, in order."""
    return list(
        WorkflowEvent.objects.filter(run_id=run_id, kind="update")
        .order_by("seq")
        .values_list("result", flat=True)
    )


def statuses(run_id: str) -> dict[str, str]:
    """``{update_id: status}`` of the run's requests."""
    return dict(UpdateRequest.objects.filter(run_id=run_id).values_list("update_id", "status"))


def expire_lease(engine: WorkflowEngine) -> None:
    """Make ``engine`` look crashed: its lease ended an hour ago on the database clock."""
    Engine.objects.filter(id=engine.engine_id).update(
        lease_expires_at=db_now() - timedelta(hours=1)
    )
