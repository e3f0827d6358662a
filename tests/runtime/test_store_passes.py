"""The store-wide signal and update poll passes of a short-lived engine (docs/celery.md).

In-process, on the test database: what each pass does with a run whose owner
is live, a run whose owner crashed, a run nobody holds, a run this process
cannot drive, a run whose drive fails, and in each ownership mode.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import weft_django as weft
from tests.factories import EngineFactory, GlobalLeaseFactory
from tests.faults import refused_checkpoints
from tests.updates import workflows as update_workflows  # noqa: F401 (registers tests.updates.*)
from tests.updates.conftest import answer, send
from weft_django.conf import PassLimits
from weft_django.exceptions import OwnershipModeMismatchError, WeftConfigurationError
from weft_django.models import (
    Claim,
    Engine,
    EngineKind,
    EngineStatus,
    OwnershipMarker,
    WorkflowRun,
    WorkflowSignal,
)
from weft_django.ownership.clock import db_now
from weft_django.runtime.engine import WorkflowEngine
from weft_django.runtime.passes.store import SIGNAL_POLL, UPDATE_POLL, run_store_pass

from .conftest import claim_of, expire_lease, steplog

pytestmark = pytest.mark.django_db

LIMITS = PassLimits.of(100, 30)


def parked(
    make_engine: Callable[..., WorkflowEngine], run_id: str, workflow: str, *args: Any
) -> WorkflowEngine:
    """Start ``run_id`` and drive it on a new engine until it parks; the engine."""
    engine = make_engine()
    weft.start(workflow, *args, workflow_id=run_id)
    engine.claim_and_drive(run_id)
    assert WorkflowRun.objects.get(pk=run_id).status == "waiting"
    return engine


def stranded(
    make_engine: Callable[..., WorkflowEngine], run_id: str, workflow: str, *args: Any
) -> str:
    """A run parked on an engine that then crashed (its lease long expired)."""
    expire_lease(parked(make_engine, run_id, workflow, *args))
    return run_id


def celery_engines() -> list[Engine]:
    return list(Engine.objects.filter(kind=EngineKind.CELERY))


def test_a_stranded_signal_is_drained_and_the_run_released(make_engine: Any) -> None:
    stranded(make_engine, "sig-1", "tests.steps_around_signal")
    weft.signal("sig-1", "go", {"ok": True})
    epoch_before = claim_of("sig-1")[0]

    summary = run_store_pass(SIGNAL_POLL, LIMITS)

    assert summary["pass"] == "signal_poll_pass"
    assert summary["counts"] == {"drained": 1}
    assert summary["failures"] == []
    run = WorkflowRun.objects.get(pk="sig-1")
    assert run.status == "completed"  # s2 and s3 ran after the signal
    assert steplog("sig-1") == ["s0", "s1", "s2", "s3"]
    assert claim_of("sig-1") == (epoch_before + 1, None)  # taken over, then released
    (engine,) = celery_engines()
    assert summary["engine_id"] == engine.id
    assert engine.status == EngineStatus.STOPPED
    assert engine.passes == {"signal_poll_pass": summary}


def test_the_drained_run_parks_again_and_stays_ownerless(make_engine: Any) -> None:
    stranded(make_engine, "col-1", "tests.collect_signals", "go", 2)
    weft.signal("col-1", "go", 1)

    summary = run_store_pass(SIGNAL_POLL, LIMITS)

    assert summary["counts"] == {"drained": 1}
    run = WorkflowRun.objects.get(pk="col-1")
    assert run.status == "waiting" and run.waiting_on["name"] == "go"
    assert not WorkflowSignal.objects.filter(run_id="col-1", consumed_at__isnull=True).exists()
    assert claim_of("col-1")[1] is None


def test_a_live_owner_is_notified_and_nothing_is_driven(make_engine: Any) -> None:
    owner = parked(make_engine, "live-1", "tests.steps_around_signal")
    weft.signal("live-1", "go")
    WorkflowRun.objects.filter(pk="live-1").update(wake_hint_at=None)
    before = claim_of("live-1")

    summary = run_store_pass(SIGNAL_POLL, LIMITS)

    assert summary["counts"] == {"owner_notified": 1}
    assert claim_of("live-1") == before == (before[0], owner.engine_id)
    run = WorkflowRun.objects.get(pk="live-1")
    assert run.status == "waiting" and run.wake_hint_at is not None
    assert WorkflowSignal.objects.filter(run_id="live-1", consumed_at__isnull=True).count() == 1
    assert owner.drive("live-1").value == "completed"  # the owner applies it itself


def test_a_pending_update_is_applied_by_the_pass_alone(make_engine: Any) -> None:
    stranded(make_engine, "upd-1", "tests.updates.counter")
    update_id = send("upd-1", "add", 5)

    summary = run_store_pass(UPDATE_POLL, LIMITS)

    assert summary["pass"] == "update_poll_pass"
    assert summary["counts"] == {"drained": 1}
    assert answer("upd-1", update_id)["total"] == 5
    assert claim_of("upd-1")[1] is None
    assert WorkflowRun.objects.get(pk="upd-1").status == "waiting"


def test_runs_nobody_needs_to_rescue_are_not_selected(make_engine: Any) -> None:
    stranded(make_engine, "quiet-1", "tests.steps_around_signal")  # no signal sent
    weft.start("tests.steps_around_signal", workflow_id="pending-1")  # never started
    stranded(make_engine, "other-1", "tests.steps_around_signal")
    weft.signal("other-1", "not-awaited")

    assert run_store_pass(SIGNAL_POLL, LIMITS)["counts"] == {}
    assert run_store_pass(UPDATE_POLL, LIMITS)["counts"] == {}


# The trigger is DDL, which MySQL/MariaDB commits at once: a rolled-back test would leak.
@pytest.mark.django_db(transaction=True)
def test_one_failing_drive_does_not_stop_the_others(make_engine: Any) -> None:
    for run_id in ("a-ok", "b-bad", "c-ok"):
        stranded(make_engine, run_id, "tests.steps_around_signal")
        weft.signal(run_id, "go")

    with refused_checkpoints("b-bad"):
        summary = run_store_pass(SIGNAL_POLL, LIMITS)

    assert summary["counts"] == {"drained": 2, "drain_failed": 1}
    (failure,) = summary["failures"]
    assert failure["run_id"] == "b-bad" and failure["error_type"] == "DrainError"
    assert "abandoned" in failure["message"]
    assert WorkflowRun.objects.get(pk="b-bad").status == "waiting"
    assert WorkflowSignal.objects.filter(run_id="b-bad", consumed_at__isnull=True).count() == 1
    assert (
        Claim.objects.filter(
            holder__isnull=False, workflow_id__in=["a-ok", "b-bad", "c-ok"]
        ).count()
        == 0
    )
    assert {r: WorkflowRun.objects.get(pk=r).status for r in ("a-ok", "c-ok")} == {
        "a-ok": "completed",
        "c-ok": "completed",
    }


def test_a_run_of_a_type_not_registered_here_is_left_alone(make_engine: Any) -> None:
    stranded(make_engine, "alien-1", "tests.steps_around_signal")
    weft.signal("alien-1", "go")
    WorkflowRun.objects.filter(pk="alien-1").update(workflow_name="elsewhere.only")

    assert run_store_pass(SIGNAL_POLL, LIMITS)["counts"] == {}
    assert claim_of("alien-1")[1] is not None  # still the crashed engine's, for its own kind


def test_the_time_budget_defers_what_it_cannot_reach(make_engine: Any) -> None:
    for run_id in ("t1", "t2"):
        stranded(make_engine, run_id, "tests.steps_around_signal")
        weft.signal(run_id, "go")

    summary = run_store_pass(SIGNAL_POLL, PassLimits.of(100, timedelta(microseconds=1)))

    assert summary["counts"] == {"deferred": 2}
    assert [WorkflowRun.objects.get(pk=r).status for r in ("t1", "t2")] == ["waiting"] * 2


def test_the_batch_size_bounds_the_selection(make_engine: Any) -> None:
    for run_id in ("b1", "b2", "b3"):
        stranded(make_engine, run_id, "tests.steps_around_signal")
        weft.signal(run_id, "go")

    assert run_store_pass(SIGNAL_POLL, PassLimits.of(2, 30))["counts"] == {"drained": 2}
    assert run_store_pass(SIGNAL_POLL, PassLimits.of(2, 30))["counts"] == {"drained": 1}


def test_a_failing_pass_still_stops_its_engine_and_releases(
    make_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stranded(make_engine, "crash-1", "tests.steps_around_signal")
    weft.signal("crash-1", "go")

    def boom(self: WorkflowEngine, run_id: str) -> None:
        raise KeyboardInterrupt  # what no per-run handler may swallow

    monkeypatch.setattr(WorkflowEngine, "drive", boom)
    with pytest.raises(KeyboardInterrupt):
        run_store_pass(SIGNAL_POLL, LIMITS)

    (engine,) = celery_engines()
    assert engine.status == EngineStatus.STOPPED
    assert claim_of("crash-1")[1] is None
    assert engine.passes["signal_poll_pass"]["finished_at"] is not None


def test_a_mode_mismatch_refuses_before_writing(make_engine: Any, weft_settings: Any) -> None:
    make_engine()  # establishes the workflow-lease marker
    weft_settings(OWNERSHIP="lease")
    with pytest.raises(OwnershipModeMismatchError):
        run_store_pass(SIGNAL_POLL, LIMITS)
    assert celery_engines() == []


@pytest.mark.parametrize(
    ("batch_size", "time_budget"),
    [
        (0, 1),
        (-1, 1),
        (True, 1),
        ("10", 1),
        (10**6, 1),
        (10, 0),
        (10, -1),
        (10, "soon"),
        (10, float("nan")),
    ],
)
def test_bad_limits_are_refused(batch_size: Any, time_budget: Any) -> None:
    with pytest.raises(WeftConfigurationError):
        PassLimits.of(batch_size, time_budget)


# -- other ownership modes ----------------------------------------------------------------


def test_mode_lease_notifies_the_live_lease_holder(weft_settings: Any) -> None:
    weft_settings(OWNERSHIP="lease")
    holder = EngineFactory(ownership_mode="lease")
    GlobalLeaseFactory(holder=holder, epoch=3, expires_at=db_now() + timedelta(seconds=30))
    OwnershipMarker.objects.create(mode="lease", established_at=db_now())
    weft.start("tests.steps_around_signal", workflow_id="gl-1")
    WorkflowRun.objects.filter(pk="gl-1").update(
        status="waiting", waiting_on={"kind": "signal", "name": "go"}
    )
    weft.signal("gl-1", "go")

    assert run_store_pass(SIGNAL_POLL, LIMITS)["counts"] == {"owner_notified": 1}


def test_mode_lease_without_a_holder_leaves_a_hint_and_drives_nothing(weft_settings: Any) -> None:
    weft_settings(OWNERSHIP="lease")
    weft.start("tests.steps_around_signal", workflow_id="gl-2")
    WorkflowRun.objects.filter(pk="gl-2").update(
        status="waiting", waiting_on={"kind": "signal", "name": "go"}
    )
    weft.signal("gl-2", "go")
    WorkflowRun.objects.filter(pk="gl-2").update(wake_hint_at=None)

    assert run_store_pass(SIGNAL_POLL, LIMITS)["counts"] == {"hint_left": 1}
    run = WorkflowRun.objects.get(pk="gl-2")
    assert run.status == "waiting" and run.wake_hint_at is not None


def test_mode_none_never_drives(make_engine: Any, weft_settings: Any) -> None:
    weft_settings(OWNERSHIP="none")
    stranded(make_engine, "none-1", "tests.steps_around_signal")
    weft.signal("none-1", "go")

    assert run_store_pass(SIGNAL_POLL, LIMITS)["counts"] == {"hint_left": 1}
    assert WorkflowRun.objects.get(pk="none-1").status == "waiting"


def test_the_owner_clears_the_hint_it_was_notified_with(make_engine: Any) -> None:
    owner = parked(make_engine, "hint-1", "tests.collect_signals", "go", 2)
    weft.signal("hint-1", "go")
    WorkflowRun.objects.filter(pk="hint-1").update(wake_hint_at=None)
    assert run_store_pass(SIGNAL_POLL, LIMITS)["counts"] == {"owner_notified": 1}

    assert owner.drive("hint-1").value == "parked"  # for the second "go"
    assert WorkflowRun.objects.get(pk="hint-1").wake_hint_at is None  # no turn after turn
