"""Celery beat tasks with real processes: ``celery -A example_project worker`` and
``celery -A example_project beat`` on the test Redis, ``manage.py weft_worker``
processes, the test database (docs/celery.md).

The beat interval is 1 s (``BEAT_EVERY``); a run's owner that was SIGKILLed
counts as expired ``CLAIM_TTL + 2 x CLAIM_RENEW_INTERVAL`` = 5 s after its
last renewal (``helpers.FAST``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

import weft_django as weft
from tests.faults import refused_checkpoints
from tests.integration.conftest import BEAT_EVERY, CeleryProcesses, Workers
from tests.integration.helpers import FAST
from tests.integration.itapp.models import StepExecution
from weft_django.beat import beat_schedule, install_periodic_tasks
from weft_django.conf import Timing
from weft_django.models import (
    Claim,
    Engine,
    EngineKind,
    EngineStatus,
    PassSummary,
    WorkflowEvent,
    WorkflowRun,
)
from weft_django.ownership.clock import db_now

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

#: Two beat intervals, plus what one pass itself takes under load.
DELIVERY_BOUND = 2 * BEAT_EVERY + 1.5
#: The claim timing of the worker and Celery processes (not this process's).
PROCESS_TIMING = Timing(float(FAST["WEFT_CLAIM_TTL"]), float(FAST["WEFT_CLAIM_RENEW_INTERVAL"]))


def waiting_on(run_id: str, name: str) -> bool:
    run = WorkflowRun.objects.filter(pk=run_id).values_list("status", "waiting_on").first()
    return bool(run) and run[0] == "waiting" and (run[1] or {}).get("name") == name


def holder_expired(run_id: str) -> bool:
    expires = (
        Claim.objects.filter(workflow_id=run_id)
        .values_list("holder__lease_expires_at", flat=True)
        .first()
    )
    return expires is not None and PROCESS_TIMING.is_expired(expires, db_now())


def holder(run_id: str) -> str | None:
    return Claim.objects.values_list("holder_id", flat=True).get(workflow_id=run_id)


def steps(run_id: str) -> list[str]:
    return list(
        StepExecution.objects.filter(run_id=run_id, kind="step").values_list("step", flat=True)
    )


def celery_summaries(pass_name: str) -> list[dict[str, Any]]:
    rows = Engine.objects.filter(kind=EngineKind.CELERY).values_list("passes", flat=True)
    return [passes[pass_name] for passes in rows if pass_name in passes]


def engine_of(run_id: str, step: str) -> str:
    return WorkflowEvent.objects.values_list("engine_id", flat=True).get(run_id=run_id, name=step)


def celery_engine_ids() -> set[str]:
    return set(Engine.objects.filter(kind=EngineKind.CELERY).values_list("id", flat=True))


def strand(
    workers: Workers, wait: Callable[..., object], *runs: tuple[str, dict[str, Any]]
) -> None:
    """Start ``runs`` of ``it.relay`` on a worker, park them on "go", SIGKILL the
    worker and wait until its lease has expired."""
    owner = workers.start("owner")
    for run_id, kwargs in runs:
        weft.start("it.relay", workflow_id=run_id, **kwargs)
    for run_id, _ in runs:
        wait(lambda run_id=run_id: waiting_on(run_id, "go"), 30, what=f"{run_id} to park")
    owner.send(signal.SIGKILL)
    owner.wait(10)
    wait(lambda: all(holder_expired(run_id) for run_id, _ in runs), 15, what="expiry")


def test_beat_delivers_a_stranded_signal_and_update_then_a_worker_finishes(
    workers: Workers, celery: CeleryProcesses, wait: Callable[..., object]
) -> None:
    """A run parked on a worker that was SIGKILLed, no weft_worker running: the beat
    pass delivers a signal (and another run's update) by itself, the runs park again
    with their claims released, and a worker started later completes them."""
    beat = celery.beat()
    celery_worker = celery.worker(ready=False)
    strand(workers, wait, ("relay-sig", {}), ("relay-upd", {}))
    celery.wait_ready(celery_worker)

    sent = time.monotonic()
    weft.signal("relay-sig", "go", {"n": 1})
    answer = weft.update("relay-upd", "add", 5, timeout=DELIVERY_BOUND)
    wait(lambda: waiting_on("relay-sig", "finish"), DELIVERY_BOUND, what="the signal")
    delivered_in = time.monotonic() - sent

    assert answer["total"] == 5
    assert delivered_in < DELIVERY_BOUND
    assert engine_of("relay-sig", "resumed") in celery_engine_ids()
    assert WorkflowEvent.objects.get(run_id="relay-upd", kind="update").engine_id in (
        celery_engine_ids()
    )
    # The task releases each claim right after the run parks (its own statement).
    wait(
        lambda: holder("relay-sig") is None and holder("relay-upd") is None,
        5,
        what="the task to release its claims",
    )
    assert waiting_on("relay-upd", "go")
    # Each pass stores its summary on its engine row after releasing its claims.
    for pass_name in ("signal_poll_pass", "update_poll_pass"):
        wait(
            lambda pass_name=pass_name: any(
                s["counts"].get("drained") for s in celery_summaries(pass_name)
            ),
            5,
            what=f"the {pass_name} summary with the drained run",
        )
    # ... and upserts the one PassSummary row of its kind (never a second row).
    wait(
        lambda: (
            PassSummary.objects.filter(kind__in=["signal_poll", "update_poll"], passes__gte=2)
            .values("kind")
            .count()
            == 2
        ),
        10,
        what="two passes of each kind recorded",
    )
    assert PassSummary.objects.count() == 2
    for row in PassSummary.objects.all():
        assert row.succeeded and row.engine_id in celery_engine_ids() and row.pid
    beat.kill()

    finisher = workers.start("finisher")
    weft.signal("relay-upd", "go", {"n": 2})
    for run_id in ("relay-sig", "relay-upd"):
        weft.signal(run_id, "finish")
    assert weft.result("relay-sig", timeout=30) == {"go": {"n": 1}, "finish": None, "total": 0}
    assert weft.result("relay-upd", timeout=30) == {"go": {"n": 2}, "finish": None, "total": 5}
    assert engine_of("relay-sig", "done") == finisher.engine_id
    for run_id in ("relay-sig", "relay-upd"):
        assert sorted(steps(run_id)) == ["before", "done", "resumed"]  # none twice
    assert not Claim.objects.filter(holder__kind=EngineKind.CELERY).exists()


def test_a_live_owner_is_notified_and_applies_the_signal_itself(
    workers: Workers, celery: CeleryProcesses, wait: Callable[..., object]
) -> None:
    """The owner is live but missed the signal (stored without its wake-up): the beat
    pass notifies it (``owner_notified``) and the owner, not the task, drives the run."""
    slow = {"WEFT_CLAIM_TTL": "120", "WEFT_CLAIM_RENEW_INTERVAL": "30", "WEFT_TICK_INTERVAL": "60"}
    if connection.vendor == "mysql":
        # No NOTIFY on MySQL/MariaDB: the owner finds the pass's wake hint at its fast tick.
        slow["WEFT_TICK_INTERVAL"] = "1"
    celery.beat()
    celery_worker = celery.worker(ready=False)
    owner = workers.start("owner", **slow)
    weft.start("it.relay", workflow_id="relay-live")
    wait(lambda: waiting_on("relay-live", "go"), 30, what="the run to park")
    epoch, owner_id = Claim.objects.values_list("epoch", "holder_id").get(workflow_id="relay-live")
    assert owner_id == owner.engine_id
    celery.wait_ready(celery_worker)
    wait(lambda: celery_summaries("signal_poll_pass"), 30, what="the beat's first pass")

    # A buffered signal whose wake hint and NOTIFY were lost.
    WorkflowRun.objects.get(pk="relay-live").signals.create(signal_id="lost", name="go")
    wait(lambda: waiting_on("relay-live", "finish"), 2 * DELIVERY_BOUND, what="the owner")

    assert engine_of("relay-live", "resumed") == owner.engine_id
    assert Claim.objects.values_list("epoch", "holder_id").get(workflow_id="relay-live") == (
        epoch,
        owner.engine_id,
    )
    wait(
        lambda: any(
            s["counts"].get("owner_notified") for s in celery_summaries("signal_poll_pass")
        ),
        5,
        what="the summary of the pass that notified the owner",
    )
    assert not any(s["counts"].get("drained") for s in celery_summaries("signal_poll_pass"))
    assert steps("relay-live") == ["before", "resumed"]


def test_one_failing_drive_is_drain_failed_the_others_drained(
    workers: Workers, celery: CeleryProcesses, wait: Callable[..., object]
) -> None:
    """Scheduled through django-celery-beat's DatabaseScheduler and its models."""
    pytest.importorskip("django_celery_beat", reason="the beat extra is not installed")
    runs = ("relay-a", "relay-bad", "relay-c")
    install_periodic_tasks(beat_schedule(signal_every=1, update_every=None))
    celery_worker = celery.worker(ready=False)
    celery.beat(
        scheduler="django_celery_beat.schedulers:DatabaseScheduler",
        WEFT_BEAT_SIGNAL_EVERY="0",
        WEFT_BEAT_UPDATE_EVERY="0",
    )
    strand(workers, wait, *[(run_id, {}) for run_id in runs])
    celery.wait_ready(celery_worker)
    with refused_checkpoints("relay-bad"):
        for run_id in runs:
            weft.signal(run_id, "go")

        def failed() -> list[dict[str, Any]]:
            return [
                s
                for s in celery_summaries("signal_poll_pass")
                if s["failures"] and s["failures"][0]["run_id"] == "relay-bad"
            ]

        wait(lambda: waiting_on("relay-a", "finish") and waiting_on("relay-c", "finish"), 15)
        (summary, *_) = wait(failed, 10, what="a drain_failed summary")

    assert summary["counts"]["drain_failed"] == 1
    assert summary["failures"][0]["error_type"] == "DrainError"
    assert waiting_on("relay-bad", "go")
    assert WorkflowRun.objects.get(pk="relay-bad").signals.filter(consumed_at=None).count() == 1
    assert all(holder(run_id) is None for run_id in runs)

    def drained() -> int:
        return sum(s["counts"].get("drained", 0) for s in celery_summaries("signal_poll_pass"))

    # A run reaches its park point inside a pass, whose summary is stored when the pass
    # ends (under load one run may also be deferred to the next pass): wait for them.
    wait(lambda: drained() >= 2, 10, what="both good runs counted as drained")
    assert drained() == 2


def test_sigterm_lets_the_pass_finish_and_stop_its_engine(
    workers: Workers, celery: CeleryProcesses, wait: Callable[..., object]
) -> None:
    """SIGTERM while a pass drives a run (a slow step): Celery's warm shutdown lets
    the task end; its engine is stopped and holds nothing, the run is parked."""
    beat = celery.beat()
    worker = celery.worker(ready=False)
    strand(workers, wait, ("relay-slow", {"nap_s": 2.0}))
    celery.wait_ready(worker)
    weft.signal("relay-slow", "go")
    wait(
        lambda: StepExecution.objects.filter(run_id="relay-slow", kind="nap").exists(),
        DELIVERY_BOUND,
        what="the pass to be in the slow step",
    )
    beat.kill()
    (engine_id,) = Claim.objects.filter(workflow_id="relay-slow").values_list(
        "holder_id", flat=True
    )
    assert engine_id in celery_engine_ids()

    began = time.monotonic()
    worker.send(signal.SIGTERM)
    assert worker.wait(30) == 0
    print(f"celery worker exited {time.monotonic() - began:.1f}s after SIGTERM")

    engine = Engine.objects.get(id=engine_id)
    assert engine.status == EngineStatus.STOPPED
    assert engine.passes["signal_poll_pass"]["counts"] == {"drained": 1}
    assert holder("relay-slow") is None
    assert waiting_on("relay-slow", "finish")
