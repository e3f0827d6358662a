"""The ownership strategies: one class per mode, chosen once by the factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from weft_django.conf import get_settings
from weft_django.exceptions import WeftConfigurationError, WeftSecondEngineWarning
from weft_django.models import Claim, Engine, OwnershipMarker, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership.claims.results import Acquired, LostRace
from weft_django.ownership.clock import db_now
from weft_django.ownership.modes import (
    GlobalLeaseOwnership,
    NoOwnership,
    WorkflowLeaseOwnership,
    ownership_class,
    ownership_for,
)
from weft_django.ownership.passes.outcomes import Outcome
from weft_django.ownership.writes.requests import Checkpoint, Form, NoOneStatementForm


def booted(mode: str, engine_id: str, weft_settings: Callable[..., None]) -> Any:
    weft_settings(OWNERSHIP=mode)
    ownership = ownership_for(engine_id, get_settings())
    ownership.boot(kind="test")
    return ownership


def make_run(run_id: str, status: str = RunStatus.PENDING) -> WorkflowRun:
    return WorkflowRun.objects.create(id=run_id, workflow_name="t.wf", status=status)


@pytest.mark.parametrize(
    ("mode", "cls"),
    [
        ("workflow-lease", WorkflowLeaseOwnership),
        ("lease", GlobalLeaseOwnership),
        ("none", NoOwnership),
    ],
)
def test_the_factory_picks_the_class_of_the_configured_mode(
    db: None, weft_settings: Callable[..., None], mode: str, cls: type
) -> None:
    weft_settings(OWNERSHIP=mode)
    ownership = ownership_for("engine-x", get_settings())
    assert type(ownership) is cls
    assert ownership.name == mode


def test_an_unknown_mode_is_a_configuration_error() -> None:
    with pytest.raises(WeftConfigurationError, match="'bogus' is not an ownership mode"):
        ownership_class("bogus")


def test_workflow_lease_acquires_fences_and_releases(
    db: None, weft_settings: Callable[..., None]
) -> None:
    ownership = booted("workflow-lease", "engine-a", weft_settings)
    make_run("wf")
    assert ownership.acquire("wf") == Acquired("wf", 1)
    assert ownership.fence_epoch("wf") == 1
    assert ownership.held_runs([]) == ["wf"] and ownership.held_count() == 1
    assert ownership.check_wake("wf", "tick")
    with ownership.fenced(ownership.fence_for("wf", 1)):
        WorkflowEvent.objects.create(run_id="wf", seq=0, kind="step")
    ownership.release("wf")
    assert ownership.fence_epoch("wf") is None
    assert Claim.objects.get(workflow_id="wf").holder_id is None


def test_a_disposing_strategy_takes_no_claim(db: None, weft_settings: Callable[..., None]) -> None:
    ownership = booted("workflow-lease", "engine-a", weft_settings)
    make_run("wf")
    ownership.dispose()
    assert isinstance(ownership.acquire("wf"), LostRace)
    assert not Claim.objects.filter(workflow_id="wf", holder__isnull=False).exists()


def test_workflow_lease_claims_pending_runs_of_registered_types_only(
    db: None, weft_settings: Callable[..., None]
) -> None:
    ownership = booted("workflow-lease", "engine-a", weft_settings)
    make_run("mine")
    WorkflowRun.objects.create(id="alien", workflow_name="t.other")
    assert ownership.claim_pending(db_now(), ["t.wf"], 10) == ["mine"]
    assert ownership.claim_pending(db_now(), ["t.wf"], 10) == []  # held now


def test_lease_mode_owns_everything_only_while_it_holds_the_lease(
    db: None, weft_settings: Callable[..., None]
) -> None:
    ownership = booted("lease", "engine-a", weft_settings)
    make_run("p")
    make_run("w", RunStatus.WAITING)
    assert not ownership.can_drive()
    assert isinstance(ownership.acquire("p"), LostRace)
    assert ownership.held_runs(["t.wf"]) == []
    result = ownership.renew()  # takes the free global lease
    assert result.name == "renew" and ownership.can_drive()
    epoch = ownership.fence_epoch("p")
    assert ownership.acquire("p") == Acquired("p", epoch)
    assert ownership.claim_pending(db_now(), ["t.wf"], 10) == ["p"]
    assert ownership.held_runs(["t.wf"]) == ["w"]
    assert ownership.held_count() == 0  # no per-run claims in this mode
    assert not Claim.objects.exists()
    ownership.release_all()
    assert not ownership.can_drive()


def test_lease_mode_recovery_drives_runs_left_running(
    db: None, weft_settings: Callable[..., None]
) -> None:
    ownership = booted("lease", "engine-a", weft_settings)
    for run_id in ("r1", "r2", "r3"):
        make_run(run_id, RunStatus.RUNNING)
    assert ownership.recover(["t.wf"], lambda run_id: True, lambda run_id: False).outcomes == {}
    ownership.renew()
    driven: list[str] = []
    result = ownership.recover(
        ["t.wf"],
        lambda run_id: driven.append(run_id) or run_id != "r3",
        lambda run_id: run_id == "r2",
    )
    assert driven == ["r1", "r3"]
    assert result.outcomes == {"r1": Outcome.RECLAIMED, "r3": Outcome.NOT_ELIGIBLE}


def test_mode_none_claims_but_does_not_fence(db: None, weft_settings: Callable[..., None]) -> None:
    ownership = booted("none", "engine-a", weft_settings)
    make_run("wf")
    assert ownership.acquire("wf") == Acquired("wf", 1)
    # no unfenced checkpoint or terminal commit in one statement: the fenced
    # transaction, which checks nothing here, writes them
    assert not {Form.CHECKPOINT, Form.CHECKPOINT_RUNNING, Form.FINISH} & ownership.one_statement
    with pytest.raises(NoOneStatementForm):
        ownership.insert_fenced(ownership.fence_for("wf", 1), Checkpoint([]))
    with ownership.fenced(ownership.fence_for("wf", 99)):  # any epoch: nothing is checked
        WorkflowEvent.objects.create(run_id="wf", seq=0, kind="step")
    assert not OwnershipMarker.objects.exists()


def test_mode_none_warns_about_a_second_live_engine(
    db: None, weft_settings: Callable[..., None]
) -> None:
    first = booted("none", "engine-a", weft_settings)
    first.warn_if_crowded()  # alone: nothing to say
    second = booted("none", "engine-b", weft_settings)
    assert {e.id for e in NoOwnership.crowd(get_settings())} == {"engine-a", "engine-b"}
    with pytest.warns(WeftSecondEngineWarning, match="engine-a"):
        second.warn_if_crowded()
    assert WorkflowLeaseOwnership.crowd(get_settings()) == []  # no limit in that mode
    Engine.objects.filter(id="engine-a").update(status="stopped")
    assert NoOwnership.crowd(get_settings()) == []


def test_mode_none_does_not_count_a_celery_pass_as_a_second_engine(
    db: None, weft_settings: Callable[..., None]
) -> None:
    """A Celery task's engine never drives in mode none (take_stranded leaves hints)."""
    booted("none", "engine-a", weft_settings)
    celery = NoOwnership("celery-1", get_settings())
    celery.boot(kind="celery")
    assert NoOwnership.crowd(get_settings()) == []
    assert (
        celery.take_stranded("wf", workflow_name="x", names=["x"], still_wanted=lambda run_id: True)
        is Outcome.HINT_LEFT
    )
