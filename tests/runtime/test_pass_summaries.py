"""The ``PassSummary`` rows of the Celery passes (weft_django.runtime.passes.summaries):
one row per pass kind, upserted by every pass, errors kept."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

import pytest

import weft_django as weft
from weft_django.exceptions import OwnershipModeMismatchError, WeftConfigurationError
from weft_django.models import Engine, EngineKind, PassKind, PassSummary
from weft_django.ownership.clock import db_now
from weft_django.runtime.engine import WorkflowEngine
from weft_django.runtime.passes.store import SIGNAL_POLL, UPDATE_POLL, run_store_pass
from weft_django.runtime.passes.summaries import record_pass

from .test_store_passes import LIMITS, stranded

pytestmark = pytest.mark.django_db


def test_each_pass_upserts_the_one_row_of_its_kind(make_engine: Any) -> None:
    stranded(make_engine, "sum-1", "tests.steps_around_signal")
    weft.signal("sum-1", "go")
    first = run_store_pass(SIGNAL_POLL, LIMITS)
    row = PassSummary.objects.get(kind=PassKind.SIGNAL_POLL)
    assert row.counts == {"drained": 1} and row.succeeded and row.error == ""
    assert row.passes == 1 and row.engine_id == first["engine_id"]
    assert (row.hostname, row.pid) == (socket.gethostname(), os.getpid())
    assert row.started_at <= row.finished_at

    for _ in range(3):
        run_store_pass(SIGNAL_POLL, LIMITS)
    run_store_pass(UPDATE_POLL, LIMITS)
    assert PassSummary.objects.count() == 2  # one row per kind, however many passes
    row.refresh_from_db()
    assert row.passes == 4 and row.counts == {} and row.finished_at > row.started_at - LAG
    assert PassSummary.objects.get(kind=PassKind.UPDATE_POLL).passes == 1


LAG = timedelta(seconds=1)


def test_a_failing_pass_records_its_error_and_a_later_success_keeps_it(
    make_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stranded(make_engine, "sum-crash", "tests.steps_around_signal")
    weft.signal("sum-crash", "go")

    def boom(self: WorkflowEngine, run_id: str) -> None:
        raise KeyboardInterrupt("stop")

    with monkeypatch.context() as patch:
        patch.setattr(WorkflowEngine, "drive", boom)
        with pytest.raises(KeyboardInterrupt):
            run_store_pass(SIGNAL_POLL, LIMITS)
    row = PassSummary.objects.get(kind=PassKind.SIGNAL_POLL)
    assert not row.succeeded and row.error == "KeyboardInterrupt: stop"
    assert row.last_error == "KeyboardInterrupt: stop" and row.last_error_at == row.finished_at

    run_store_pass(SIGNAL_POLL, LIMITS)
    row.refresh_from_db()
    assert row.succeeded and row.error == "" and row.passes == 2
    assert row.last_error == "KeyboardInterrupt: stop"  # kept until a later failure


def test_a_pass_refused_at_boot_says_why_on_its_row(make_engine: Any, weft_settings: Any) -> None:
    make_engine()  # establishes the workflow-lease marker
    weft_settings(OWNERSHIP="lease")
    with pytest.raises(OwnershipModeMismatchError):
        run_store_pass(SIGNAL_POLL, LIMITS)
    assert not Engine.objects.filter(kind=EngineKind.CELERY).exists()
    row = PassSummary.objects.get(kind=PassKind.SIGNAL_POLL)
    assert not row.succeeded and row.error.startswith("OwnershipModeMismatchError: ")


def test_per_run_failures_are_kept_bounded() -> None:
    now = db_now()
    failures = [{"run_id": f"r{n}", "error_type": "X", "message": "m"} for n in range(50)]
    record_pass(
        PassKind.UPDATE_POLL,
        started_at=now,
        finished_at=now,
        counts={"drain_failed": 50},
        failures=failures,
    )
    row = PassSummary.objects.get(kind=PassKind.UPDATE_POLL)
    assert len(row.failures) == 20 and row.failures[0]["run_id"] == "r0"
    assert row.counts == {"drain_failed": 50}


def test_the_prune_task_records_what_it_deleted() -> None:
    pytest.importorskip("celery")
    from tests.factories import WorkflowRunFactory
    from weft_django.tasks import prune_pass

    WorkflowRunFactory(id="old", completed=True, finished_at=db_now() - timedelta(days=30))
    prune_pass(batch_size=10, time_budget=30)
    row = PassSummary.objects.get(kind=PassKind.PRUNE)
    assert row.counts["runs"] == 1 and row.succeeded and row.passes == 1
    with pytest.raises(WeftConfigurationError):
        prune_pass(batch_size=0)  # refused: recorded as the pass's error
    row.refresh_from_db()
    assert not row.succeeded and "batch_size" in row.error and row.passes == 2
