"""Operator calls racing an owner's fenced checkpoint, with real row locks
(PostgreSQL and MariaDB/MySQL).

The owner holds a lock on its claim row (PostgreSQL ``FOR SHARE``, MySQL
``FOR UPDATE``) for the whole checkpoint transaction; an external transition
must queue behind it, not deadlock with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

import weft_django as weft
from weft_django.models import RunStatus, WorkflowRun
from weft_django.runtime.engine import TurnOutcome

from . import workflows
from .conftest import claim_of, kinds, steplog

pytestmark = [pytest.mark.postgres, pytest.mark.mysql, pytest.mark.django_db(transaction=True)]


def _in_thread(call: Callable[[], Any], errors: list[BaseException]) -> threading.Thread:
    def target() -> None:
        try:
            call()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def _a_session_waits_on_a_row_lock() -> bool:
    """PostgreSQL: another session of this database is waiting on a lock (asked
    from the owner's own connection, inside its transaction: a read takes no lock)."""
    with connection.cursor() as cursor:
        # Statistics views are a snapshot per transaction: take a fresh one.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] > 0


def _until(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the operator never queued behind the owner"
        time.sleep(0.01)


@pytest.mark.parametrize("verb", ["cancel", "suspend", "purge"])
def test_operator_call_during_the_owners_checkpoint_waits_instead_of_deadlocking(
    make_engine: Callable[..., Any], verb: str
) -> None:
    engine = make_engine()
    weft.start("tests.transactional_first", workflow_id="race1")
    engine.acquire("race1")
    errors: list[BaseException] = []
    threads: list[threading.Thread] = []

    def operator_acts_now() -> None:
        # Inside the owner's checkpoint transaction: another process calls the verb
        # and must wait for the owner's claim lock; wait until it does (a fixed
        # sleep was not always enough under CI load: the owner's next checkpoint
        # then committed before the operator came).
        threads.append(_in_thread(lambda: getattr(weft, verb)("race1"), errors))
        if connection.vendor == "postgresql":
            _until(_a_session_waits_on_a_row_lock, 4)
        else:  # MariaDB/MySQL: a fixed head start
            time.sleep(0.5)

    workflows.hook("after", "tx", operator_acts_now)
    started = time.monotonic()
    outcome = engine.drive("race1")
    threads[0].join(timeout=30)

    assert errors == []
    assert outcome == TurnOutcome.DEPOSED  # the checkpoint committed; the next write did not
    assert time.monotonic() - started < 5
    assert claim_of("race1") == (2, None)
    if verb == "purge":
        assert not WorkflowRun.objects.filter(pk="race1").exists()
        return
    # The operator queued behind the tx checkpoint (had it gone first, tx would
    # have been refused). Where it lands after that is not FIFO on PostgreSQL:
    # once the owner commits, the row is momentarily free, and the owner's next
    # FOR SHARE can take it before the woken operator's backend is scheduled (a
    # loaded machine). Then s1's checkpoint commits first and the finish is the
    # refused write. Either way no write lands after the operator's commit.
    assert kinds("race1") in ([("step", "tx")], [("step", "tx"), ("step", "s1")])
    assert steplog("race1") == ["tx", "s1"]  # s1 ran once; nothing ran after the verb
    expected = RunStatus.CANCELLED if verb == "cancel" else RunStatus.SUSPENDED
    assert WorkflowRun.objects.get(pk="race1").status == expected
