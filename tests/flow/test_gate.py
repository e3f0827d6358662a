"""A turn's admission in the engine: deferred durably for a slot or the rate
window, its slots freed when it ends (a parked run holds none), RetryAfter."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import weft_django as weft
from weft_django.flow.slots import slots_in_use, take_slot
from weft_django.models import QueueSlot, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership import Acquired
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.runtime.engine import TurnOutcome
from weft_django.testing import WorkflowDriver

from . import workflows


def _hold_key_slot(registry: ClaimRegistry, key: str) -> None:
    """Another engine's turn of another run holds ``key``'s one slot."""
    claimed = registry.acquire("elsewhere")
    assert isinstance(claimed, Acquired)
    assert take_slot(
        "default",
        "payments",
        key,
        1,
        run_id="elsewhere",
        engine_id=registry.engine_id,
        epoch=claimed.epoch,
        now=registry.now(),
    )


def test_a_run_without_a_slot_is_deferred_then_runs(
    driver: WorkflowDriver,
    make_registry: Callable[..., ClaimRegistry],
    metric: Callable[..., float],
) -> None:
    other = make_registry()
    _hold_key_slot(other, "customer-1")
    weft.start("tests.flow.in_payments", workflow_id="p1", concurrency_key="customer-1")
    assert driver.run_until_idle() == {"throttled": 1}
    run = WorkflowRun.objects.get(pk="p1")
    assert run.status == RunStatus.PENDING
    assert run.start_at is not None and run.start_at == run.wake_at  # durable, not polled
    assert metric("weft_flow_throttled_total", queue="payments", reason="slot") >= 1
    other.release("elsewhere")  # its turn ended: the key's slot is free
    driver.advance(2)
    assert weft.result("p1", timeout=0) == "paid"
    assert slots_in_use("default") == {}


def test_a_parked_run_holds_no_slot(driver: WorkflowDriver) -> None:
    weft.start("tests.flow.pay_then_sleep", workflow_id="s1", concurrency_key="c")
    assert driver.run_until_idle() == {"parked": 1}
    assert slots_in_use("default") == {}
    driver.advance(61)
    assert weft.result("s1", timeout=0) == "shipped"


def test_the_rate_window_parks_the_run_until_it_opens(driver: WorkflowDriver) -> None:
    for n in range(2):
        weft.start("tests.flow.one_step", n, workflow_id=f"m{n}", queue="mail")
    assert driver.run_until_idle() == {"completed": 1, "throttled": 1}
    waiting = WorkflowRun.objects.get(status=RunStatus.PENDING)
    done = WorkflowRun.objects.get(status=RunStatus.COMPLETED)
    # One turn a minute: the window opens a minute after the first turn.
    assert done.started_at is not None and waiting.start_at is not None
    gap = (waiting.start_at - done.started_at).total_seconds()
    assert 55 <= gap <= 65, gap
    driver.advance(30)
    assert WorkflowRun.objects.get(pk=waiting.pk).status == RunStatus.PENDING
    driver.advance(35)
    assert WorkflowRun.objects.get(pk=waiting.pk).status == RunStatus.COMPLETED


def test_retry_after_sleeps_durably_until_then(driver: WorkflowDriver) -> None:
    workflows.STATE["retry_after"] = 1
    weft.start("tests.flow.throttled_call", workflow_id="ra")
    assert driver.run_until_idle() == {"parked": 1}
    run = WorkflowRun.objects.get(pk="ra")
    assert run.waiting_on["kind"] == "retry_wait"
    assert run.wake_at is not None
    driver.advance(25)
    assert workflows.STATE["calls"] == 1
    driver.advance(10)
    assert weft.result("ra", timeout=0) == "ok"
    assert workflows.STATE["calls"] == 2
    events = WorkflowEvent.objects.filter(run_id="ra").order_by("seq")
    assert [(e.kind, e.name) for e in events] == [("retry_wait", "call"), ("step", "call")]
    assert events[0].result["attempt"] == 1


def test_retry_after_with_no_attempt_left_fails_the_step(driver: WorkflowDriver) -> None:
    workflows.STATE["retry_after"] = 5
    weft.start("tests.flow.throttled_call", 2, workflow_id="rb")
    driver.run_until_idle()
    driver.advance(31)
    assert WorkflowRun.objects.get(pk="rb").status == RunStatus.FAILED
    assert workflows.STATE["calls"] == 2


@pytest.mark.postgres
def test_a_limited_turn_costs_one_statement_more_and_its_last_write_frees_its_slot(
    driver: WorkflowDriver,
) -> None:
    """On PostgreSQL a limited turn adds one statement, its admission; the
    release of its slot rides in its park or finish statement."""
    weft.start("tests.flow.one_step", workflow_id="warm", queue="payments")
    driver.run_until_idle()  # the queue's slot rows are made on first use

    def statements(
        workflow_id: str, queue: str, workflow: str = "tests.flow.one_step"
    ) -> list[str]:
        weft.start(workflow, workflow_id=workflow_id, queue=queue)
        with CaptureQueriesContext(connection) as queries:
            driver.run_until_idle()
        return [query["sql"] for query in queries.captured_queries]

    free, limited = statements("free", "open"), statements("limited", "payments")
    assert weft.result("limited", timeout=0) == 0
    assert len(limited) == len(free) + 1
    assert not [sql for sql in limited if sql.startswith('UPDATE "weft_django_queueslot"')]
    assert slots_in_use("default") == {}
    parked = statements("parked", "payments", "tests.flow.pay_then_sleep")
    assert WorkflowRun.objects.get(pk="parked").status == RunStatus.WAITING
    assert not [sql for sql in parked if sql.startswith('UPDATE "weft_django_queueslot"')]
    assert slots_in_use("default") == {}
    assert not QueueSlot.objects.filter(run_id__isnull=False).exists()


@pytest.mark.postgres
@pytest.mark.mysql
def test_a_first_turn_admitted_at_pickup_skips_its_admission(driver: WorkflowDriver) -> None:
    """The intake's batch is admitted with its prefetch (a statement per queue
    on PostgreSQL, a transaction on MariaDB): the turn then reads no slot and
    takes none, its last write frees it; a turn that is not due yet frees the
    one taken for it."""
    weft.start("tests.flow.one_step", workflow_id="warm", queue="payments")
    driver.run_until_idle()  # the queue's slot rows are made on first use
    engine = driver.engine
    weft.start("tests.flow.one_step", workflow_id="new", queue="payments")
    later = timezone.now() + timedelta(hours=1)
    weft.start("tests.flow.one_step", workflow_id="later", queue="payments", start_at=later)
    for run_id in ("new", "later"):
        assert isinstance(engine.acquire(run_id), Acquired)
    engine.prefetch(["new", "later"])
    assert set(QueueSlot.objects.exclude(run_id=None).values_list("run_id", flat=True)) == {
        "new",
        "later",
    }
    with CaptureQueriesContext(connection) as queries:
        assert engine.drive("new") == TurnOutcome.COMPLETED
    taking = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("WITH g0")  # PostgreSQL's admission
        or (q["sql"].startswith("SELECT") and "weft_django_queueslot" in q["sql"])
    ]
    assert taking == []
    assert engine.drive("later") == TurnOutcome.NOT_DUE
    assert not QueueSlot.objects.filter(run_id__isnull=False).exists()
    assert slots_in_use("default") == {}
