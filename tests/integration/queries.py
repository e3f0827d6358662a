"""Database reads the integration tests share (the pytest process's connection)."""

from __future__ import annotations

from collections import Counter

import weft_django as weft
from tests.integration.itapp.models import StepExecution
from weft_django.models import Claim, Engine, RunStatus, WorkflowEvent, WorkflowRun


def statuses(run_ids: list[str]) -> Counter[str]:
    return Counter(WorkflowRun.objects.filter(pk__in=run_ids).values_list("status", flat=True))


def all_completed(run_ids: list[str]) -> bool:
    return statuses(run_ids) == Counter({RunStatus.COMPLETED: len(run_ids)})


def holder(run_id: str) -> str | None:
    return Claim.objects.filter(workflow_id=run_id).values_list("holder_id", flat=True).first()


def owner_pid(run_id: str) -> int | None:
    """The pid of the engine holding ``run_id`` (via ``weft.describe``)."""
    owner = weft.describe(run_id).owner_engine_id
    if owner is None:
        return None
    return Engine.objects.filter(id=owner).values_list("pid", flat=True).first()


def step_counts(run_ids: list[str] | None = None) -> Counter[tuple[str, str]]:
    """How many times each committed (run, step) was recorded."""
    rows = StepExecution.objects.filter(kind="step")
    if run_ids is not None:
        rows = rows.filter(run_id__in=run_ids)
    return Counter(rows.values_list("run_id", "step"))


def duplicates(run_ids: list[str] | None = None) -> dict[tuple[str, str], int]:
    return {key: count for key, count in step_counts(run_ids).items() if count != 1}


def naps(run_id: str) -> list[tuple[int, float]]:
    """(pid, wall time) of every start of a slow step of ``run_id``, in order."""
    return list(
        StepExecution.objects.filter(run_id=run_id, kind="nap")
        .order_by("id")
        .values_list("pid", "at")
    )


def events_by(run_id: str) -> list[tuple[int, str, str, int]]:
    """(seq, kind, engine id, epoch) of the run's recorded events."""
    return list(
        WorkflowEvent.objects.filter(run_id=run_id)
        .order_by("seq")
        .values_list("seq", "kind", "engine_id", "epoch")
    )
