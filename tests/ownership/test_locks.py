"""Bounded lock waits: an owner holding its run locked in an open transaction (frozen
inside a transactional step) never stalls a takeover or an operator's call, and the
server ends its session so the run can be taken over."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, OperationalError, connection, transaction

import weft_django as weft
from weft_django.conf import get_settings
from weft_django.models import Claim, Engine, RunStatus, WorkflowRun, WorkflowSignal
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.claims.results import Acquired, Busy
from weft_django.ownership.clock import db_now
from weft_django.ownership.leases.engines import register_engine
from weft_django.ownership.locks import busy_as_typed_error, is_lock_failure
from weft_django.ownership.writes.fence import LOCKING_READS
from weft_django.runtime.backoff import is_transient
from weft_django.worker.pool import end_idle_transactions

pytestmark = pytest.mark.django_db(transaction=True)


@weft.workflow(name="tests.locks.noop")
def noop(ctx: weft.Context, value: int) -> int:
    return value


class FrozenOwner:
    """A thread holding the claim row of ``wf`` locked in an open transaction, as
    an owner frozen inside a transactional step does, until told to finish."""

    def __init__(self, idle_timeout: float | None = None) -> None:
        self.locked = threading.Event()
        self.finish = threading.Event()
        self.error: BaseException | None = None
        self.idle_timeout = idle_timeout
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        assert self.locked.wait(10), self.error

    def _main(self) -> None:
        undo = None
        try:
            if self.idle_timeout is not None:
                undo = end_idle_transactions("default", self.idle_timeout)
            with transaction.atomic(), connection.cursor() as cursor:
                locking = LOCKING_READS[connection.vendor][Claim]  # what an owner takes
                cursor.execute(
                    f"SELECT 1 FROM weft_django_claim WHERE workflow_id = 'wf' {locking}"
                )
                self.locked.set()
                self.finish.wait(30)
                cursor.execute("SELECT 1")  # the "commit" of the revived owner
        except BaseException as exc:
            self.error = exc
            self.locked.set()
        finally:
            if undo is not None:
                undo()
            connection.close()

    def stop(self) -> None:
        self.finish.set()
        self.thread.join(30)


@pytest.fixture
def held_run(weft_settings: Callable[..., None]) -> Iterator[tuple[str, str]]:
    """Engine ``owner`` holds run ``wf``; its lease expired a minute ago."""
    config = get_settings()
    owner, rival = (
        register_engine(config, engine_id=e, kind="test").id for e in ("owner", "rival")
    )
    WorkflowRun.objects.create(id="wf", workflow_name="t.wf", status=RunStatus.RUNNING)
    assert ClaimRegistry(owner).acquire("wf") == Acquired("wf", 1)
    Engine.objects.filter(id=owner).update(lease_expires_at=db_now() - timedelta(minutes=1))
    yield owner, rival


@pytest.mark.postgres
@pytest.mark.mysql
def test_a_takeover_of_a_run_locked_by_a_frozen_owner_is_busy_not_stuck(
    held_run: tuple[str, str], metric: Callable[..., Any]
) -> None:
    owner, rival = held_run
    frozen = FrozenOwner()
    before = metric("weft_workflow_claim_attempts_total", outcome="busy")
    began = time.monotonic()
    result = ClaimRegistry(rival).claim("wf")
    waited = time.monotonic() - began
    assert result == Busy("wf", owner)
    assert waited < 5  # the pass's bounded lock wait (1 s), not forever
    assert metric("weft_workflow_claim_attempts_total", outcome="busy") - before == 1
    # Nothing moved: not the claim, not the engine row's revocation counter.
    assert Claim.objects.get(workflow_id="wf").holder_id == owner
    assert Engine.objects.get(id=owner).revocations == 0
    frozen.stop()
    assert ClaimRegistry(rival).claim("wf") == Acquired("wf", 2, takeover=True)


@pytest.mark.postgres
@pytest.mark.mysql
def test_an_operator_call_on_a_locked_run_says_busy_promptly(held_run: tuple[str, str]) -> None:
    WorkflowRun.objects.filter(pk="wf").update(status=RunStatus.WAITING)
    frozen = FrozenOwner()
    for verb in (weft.cancel, weft.suspend, weft.purge):
        began = time.monotonic()
        with pytest.raises(weft.WorkflowBusyError, match="'wf' is busy") as busy:
            verb("wf")
        assert time.monotonic() - began < 6
        assert busy.value.workflow_id == "wf"
    assert WorkflowRun.objects.get(pk="wf").status == RunStatus.WAITING  # nothing changed
    assert Claim.objects.get(workflow_id="wf").epoch == 1
    frozen.stop()
    weft.cancel("wf")
    assert WorkflowRun.objects.get(pk="wf").status == RunStatus.CANCELLED


@pytest.mark.postgres
@pytest.mark.mysql
def test_the_server_ends_a_session_idle_in_a_transaction_and_its_commit_is_refused(
    held_run: tuple[str, str],
) -> None:
    _owner, rival = held_run
    frozen = FrozenOwner(idle_timeout=1.0)  # MariaDB counts whole seconds
    time.sleep(2.5)  # past the idle-in-transaction timeout: the server ended the session
    assert ClaimRegistry(rival).claim("wf") == Acquired("wf", 2, takeover=True)
    frozen.stop()  # the revived owner's next statement fails: its transaction is gone
    assert isinstance(frozen.error, DatabaseError)
    assert is_transient(frozen.error)  # a turn that meets it backs off, never suspends


def test_a_locked_sqlite_database_is_a_typed_busy_error(db: None, tmp_path: Any) -> None:
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        pytest.skip("SQLite with a database file only (another connection holds its lock)")
    weft.start("tests.locks.noop", 1, workflow_id="locked")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout = 100")  # instead of the configured 30 s
    other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process, frozen inside a write
    try:
        with pytest.raises(weft.StoreBusyError, match="database is busy"):
            weft.signal("locked", "s", 1)
        with pytest.raises(weft.StoreBusyError):
            weft.start("tests.locks.noop", 2, workflow_id="locked-2")
        with pytest.raises(weft.WorkflowBusyError):
            weft.cancel("locked")
    finally:
        other.execute("ROLLBACK")
        other.close()
    # Nothing was half-written.
    assert WorkflowSignal.objects.count() == 0
    assert list(WorkflowRun.objects.values_list("pk", "status")) == [("locked", "pending")]


def test_only_lock_failures_are_turned_into_busy_errors() -> None:
    assert is_lock_failure(OperationalError("database is locked"))
    assert not is_lock_failure(OperationalError("no such table: x"))
    assert not is_lock_failure(ValueError("database is locked"))
    with pytest.raises(OperationalError, match="no such table"), busy_as_typed_error("r"):
        raise OperationalError("no such table: x")
