"""Faults with real worker processes: an owner frozen inside a transaction, a
checkpoint the database keeps refusing, a renewal thread that dies or cannot renew,
and every backend of the workers terminated mid-load (docs/ownership.md, "Faults")."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest
from django.db import connection

import weft_django as weft
from tests.integration.conftest import Workers
from tests.integration.helpers import wait_for
from tests.integration.itapp.models import StepExecution
from weft_django.models import Claim, Engine, EngineStatus, RunStatus, WorkflowEvent, WorkflowRun

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TTL, RENEW = 3.0, 1.0  # helpers.FAST
IDLE_TIMEOUT = 2.0


def statuses(run_ids: list[str]) -> dict[str, str]:
    return dict(WorkflowRun.objects.filter(pk__in=run_ids).values_list("pk", "status"))


def store_state(workers: Workers) -> str:
    """What an operator would look at when a takeover is late: the workers' logs, the
    claim, each engine's lease and last passes, and every session of the database."""
    lines = [workers.tails(), "--- claims ---"]
    lines += [repr(row) for row in Claim.objects.values()]
    lines.append("--- engines ---")
    for engine in Engine.objects.order_by("started_at"):
        lines.append(
            f"{engine.id} {engine.status} lease_expires_at={engine.lease_expires_at:%H:%M:%S.%f} "
            f"revocations={engine.revocations} passes={engine.passes}"
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT clock_timestamp(), pid, state, wait_event_type, wait_event, "
            "now() - state_change, left(query, 160) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        lines.append("--- sessions ---")
        lines += [repr(row) for row in cursor.fetchall()]
    return "\n".join(lines)


def inside_the_transactional_step() -> bool:
    """A worker backend sits idle in the transaction of ``hold_transaction`` (its last
    statement recorded the step's row)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND state = 'idle in transaction' AND pid <> pg_backend_pid() "
            "AND query LIKE '%%itapp_stepexecution%%'"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.postgres
def test_an_owner_frozen_inside_a_transaction_is_taken_over_in_bounded_time(
    workers: Workers, wait: Callable[..., object]
) -> None:
    env = {"WEFT_IDLE_IN_TRANSACTION_TIMEOUT": str(IDLE_TIMEOUT)}
    a = workers.start("a", **env)
    weft.start("it.txn_hold", 60.0, workflow_id="frozen")
    wait(inside_the_transactional_step, 20, what="a inside the transactional step")
    assert Claim.objects.get(workflow_id="frozen").holder_id == a.engine_id
    # b is up before a freezes: the bound is the takeover's, not b's boot (seconds under
    # CI load).
    b = workers.start("b", **env)
    frozen_at = a.send(signal.SIGSTOP)
    # Meanwhile b's passes are not stalled: a new run completes on b at once.
    weft.start("it.steps", 2, workflow_id="unrelated")
    wait(lambda: statuses(["unrelated"]) == {"unrelated": "completed"}, 15, what="unrelated run")
    # The takeover is the claim's move past a's epoch (b is the only other engine). Not
    # "b holds it": under load b may take the run, finish it and release the claim
    # before this poll begins.
    wait_for(
        lambda: Claim.objects.filter(workflow_id="frozen", epoch__gt=1).exists(),
        TTL + 3 * RENEW + IDLE_TIMEOUT + 10,
        what="b to take the frozen run over",
        on_timeout=lambda: store_state(workers),
    )
    took = time.monotonic() - frozen_at
    # The claim bound plus the documented margin: the server ends the frozen session
    # after IDLE_IN_TRANSACTION_TIMEOUT, then one reclaim pass and its lock wait.
    assert took < max(TTL + 3 * RENEW, IDLE_TIMEOUT + RENEW + 1) + 3, took
    wait(lambda: statuses(["frozen"]) == {"frozen": "completed"}, 20, what="the run to finish")
    a.send(signal.SIGCONT)  # the zombie wakes up: its transaction is gone, nothing commits
    time.sleep(RENEW * 2)
    rows = list(
        StepExecution.objects.filter(run_id="frozen", kind="step").values_list("step", "epoch")
    )
    assert sorted(rows) == [("after", 2), ("txn", 2)]  # exactly once, by the new owner
    assert not WorkflowEvent.objects.filter(
        run_id="frozen", engine_id=a.engine_id, kind="step"
    ).exists()
    assert set(
        WorkflowEvent.objects.filter(run_id="frozen", epoch=2).values_list("engine_id", flat=True)
    ) == {b.engine_id}


@pytest.mark.postgres
def test_a_checkpoint_refused_by_the_database_backs_off_then_suspends(
    workers: Workers, wait: Callable[..., object]
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE OR REPLACE FUNCTION it_refuse() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'IT: refused by a trigger'; END $$ LANGUAGE plpgsql"
        )
        cursor.execute(
            "CREATE TRIGGER it_refuse BEFORE INSERT ON weft_django_workflowevent FOR EACH ROW "
            "WHEN (NEW.run_id = 'refused') EXECUTE FUNCTION it_refuse()"
        )
    try:
        workers.start("a")
        began = time.monotonic()
        weft.start("it.steps", 1, 0, 0.0, workflow_id="refused")  # a nap step, then a step
        wait(lambda: statuses(["refused"]) == {"refused": "suspended"}, 30, what="suspension")
        elapsed = time.monotonic() - began
        # The nap step's side effect ran once per attempt: at most the limit (5), spread
        # over the backoff (0.25 + 0.5 + 1 + 2 s at the least), never a tight loop.
        naps = StepExecution.objects.filter(run_id="refused", kind="nap").count()
        assert naps == 5
        assert elapsed > 3.5
        error = WorkflowRun.objects.get(pk="refused").error
        assert "5 consecutive turns refused by the database" in error["message"]
        assert "IT: refused by a trigger" in error["message"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS it_refuse ON weft_django_workflowevent")
            cursor.execute("DROP FUNCTION IF EXISTS it_refuse()")
    weft.resume("refused")  # once the cause is gone, the run completes
    wait(lambda: statuses(["refused"]) == {"refused": "completed"}, 20, what="completion")


def test_a_renewal_thread_that_dies_is_restarted(
    workers: Workers, wait: Callable[..., object]
) -> None:
    a = workers.start("a", IT_FAULT="renewal-thread-dies-once")
    wait(lambda: "thread weft-renewal died; restarting" in a.log(), 10, what="the restart")
    before = Engine.objects.get(id=a.engine_id).heartbeat_at
    wait(
        lambda: Engine.objects.get(id=a.engine_id).heartbeat_at > before,
        3 * RENEW + 2,
        what="a renewal by the restarted thread",
    )
    weft.start("it.steps", 2, workflow_id="after-restart")
    wait(lambda: statuses(["after-restart"]) == {"after-restart": "completed"}, 15, what="run")
    assert a.alive


def test_a_worker_that_cannot_renew_stops_claiming_and_exits_non_zero(
    workers: Workers, wait: Callable[..., object]
) -> None:
    a = workers.start("a", IT_FAULT="renew-fails")
    wait(lambda: "not claiming or driving" in a.log(), TTL + 3, what="a to stop claiming")
    run_id = weft.start("it.steps", 1).id
    assert a.wait(timeout=2 * TTL + 5) == 1
    assert "weft_worker gave up" in a.log()
    assert statuses([run_id]) == {run_id: "pending"}  # never claimed while suspect
    assert Engine.objects.get(id=a.engine_id).status == EngineStatus.STOPPED


@pytest.mark.postgres
def test_every_backend_terminated_mid_load_nothing_lost_nothing_twice(
    workers: Workers, wait: Callable[..., object]
) -> None:
    for name in ("a", "b"):
        workers.start(name)
    run_ids = [weft.start("it.steps", 6, 2, 0.3).id for _ in range(20)]
    waiters = [weft.start("it.waiter").id for _ in range(5)]
    for _round in range(3):
        time.sleep(1.0)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            assert cursor.fetchone()[0] > 0
    for run_id in waiters:
        weft.signal(run_id, "go", run_id)
    every = run_ids + waiters
    wait(
        lambda: set(statuses(every).values()) == {RunStatus.COMPLETED},
        60,
        what="every run to complete after the terminations",
    )
    for run_id in run_ids:
        steps = list(
            StepExecution.objects.filter(run_id=run_id, kind="step").values_list("step", flat=True)
        )
        assert sorted(steps) == [f"s{i}" for i in range(6)], run_id  # each exactly once
    assert all(process.alive for process in workers.started)
