"""weft_django.operations: one audited code path for every operator operation.

Each operation records who and why: the run's error, a ``LogEntry`` for a
user, a log line on ``weft_django.operations``; :data:`APPLIES_TO` says which
status allows which operation, and the runtime agrees with it.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType

import weft_django as weft
from tests.factories import EngineFactory, WorkflowRunFactory, WorkflowSignalFactory
from weft_django import operations
from weft_django.exceptions import WeftError, WorkflowTerminalError
from weft_django.models import Claim, RunStatus, WorkflowRun, WorkflowSignal

pytestmark = pytest.mark.django_db

LOGGER = "weft_django.operations"


@pytest.fixture
def alice(db: None) -> User:
    return User.objects.create_user("alice", password="pw", is_staff=True)


def lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


def entries() -> list[tuple[str, str, int, str, str]]:
    return [
        (e.user.get_username(), e.object_id, e.action_flag, e.change_message, e.object_repr)
        for e in LogEntry.objects.order_by("pk")
    ]


def error_message(run_id: str) -> str | None:
    error = WorkflowRun.objects.get(pk=run_id).error
    return None if error is None else error["message"]


# -- who and why, per operation ------------------------------------------------------


def test_cancel_by_a_user_records_the_user_and_the_reason(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    run = WorkflowRunFactory(id="order-42", waiting=True, claim=EngineFactory(), claim__epoch=3)
    weft.cancel(run.pk, reason="  duplicate\norder ", by=alice)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert error_message(run.pk) == "cancelled by alice: duplicate order"
    assert Claim.objects.get(pk=run.pk).epoch == 4  # the protocol's rotation still applies
    assert entries() == [
        (
            "alice",
            "order-42",
            CHANGE,
            "Cancelled. Reason: duplicate order",
            "shop.approve_order:order-42",
        )
    ]
    entry = LogEntry.objects.get()
    assert entry.content_type == ContentType.objects.get_for_model(WorkflowRun)
    assert entry.get_change_message() == "Cancelled. Reason: duplicate order"
    assert lines(caplog) == ["cancelled run order-42 by alice: duplicate order"]
    record = next(r for r in caplog.records if r.name == LOGGER)
    assert (record.actor, record.reason, record.weft_operation) == (  # type: ignore[attr-defined]
        "alice",
        "duplicate order",
        "cancel",
    )


def test_cancel_from_code_names_an_operator_and_writes_no_log_entry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    plain = WorkflowRunFactory(waiting=True)
    named = WorkflowRunFactory(waiting=True)
    weft.cancel(plain.pk)
    weft.get_handle(named.pk).cancel(reason="customer asked", by="support-bot")
    assert error_message(plain.pk) == "cancelled by an operator"  # as before
    assert error_message(named.pk) == "cancelled by support-bot: customer asked"
    assert not LogEntry.objects.exists()  # a LogEntry needs a user
    assert lines(caplog) == [
        f"cancelled run {plain.pk} by an operator",
        f"cancelled run {named.pk} by support-bot: customer asked",
    ]


def test_suspend_and_resume_record_who_and_why(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    run = WorkflowRunFactory(waiting=True)
    weft.suspend(run.pk, reason="bad deploy", by=alice)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.SUSPENDED
    assert error_message(run.pk) == "suspended by alice: bad deploy"
    weft.resume(run.pk, by=alice)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.PENDING
    assert error_message(run.pk) is None
    assert [(e[2], e[3]) for e in entries()] == [
        (CHANGE, "Suspended. Reason: bad deploy"),
        (CHANGE, "Resumed (no reason given)."),
    ]
    assert lines(caplog) == [
        f"suspended run {run.pk} by alice: bad deploy",
        f"resumed run {run.pk} by alice",
    ]


def test_suspend_from_code_without_reason_records_no_error() -> None:
    run = WorkflowRunFactory(waiting=True)
    weft.suspend(run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).error is None  # as before


def test_purge_writes_a_deletion_entry(alice: User, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    run = WorkflowRunFactory(id="gone-1", completed=True, claim=True)
    weft.purge(run.pk, reason="GDPR request", by=alice)
    assert not WorkflowRun.objects.filter(pk=run.pk).exists()
    assert entries() == [
        ("alice", "gone-1", DELETION, "Purged. Reason: GDPR request", "shop.approve_order:gone-1")
    ]
    assert lines(caplog) == ["purged run gone-1 by alice: GDPR request"]


def test_signal_by_a_user_is_recorded_and_application_signals_log_at_debug(
    alice: User, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, LOGGER)
    run = WorkflowRunFactory(waiting=True)
    weft.signal(run.pk, "decision", {"ok": True}, signal_id="s-1", reason="manual", by=alice)
    weft.signal(run.pk, "decision", {"ok": True}, signal_id="s-1", by=alice)  # a no-op repeat
    weft.signal(run.pk, "tick", 1, signal_id="s-2")
    assert WorkflowSignal.objects.filter(run=run).count() == 2
    assert [(e[2], e[3]) for e in entries()] == [
        (CHANGE, "Signalled with 'decision' (s-1). Reason: manual")
    ]
    assert lines(caplog) == [f"signalled run {run.pk} by alice with 'decision' (s-1): manual"]
    assert lines(caplog, logging.DEBUG) == [
        f"signalled run {run.pk} by an operator with 'tick' (s-2)"
    ]


# -- the record is part of the operation ---------------------------------------------


def test_a_failed_log_entry_rolls_the_operation_back(
    alice: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)

    def refuse(self: LogEntry, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("audit table is full")

    monkeypatch.setattr(LogEntry, "save", refuse)
    run = WorkflowRunFactory(waiting=True, claim=True)
    before = Claim.objects.get(pk=run.pk).epoch
    with pytest.raises(RuntimeError, match="audit table is full"):
        weft.cancel(run.pk, by=alice)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert Claim.objects.get(pk=run.pk).epoch == before
    with pytest.raises(RuntimeError):
        weft.purge(run.pk, by=alice)
    assert WorkflowRun.objects.filter(pk=run.pk).exists()
    with pytest.raises(RuntimeError):
        weft.signal(run.pk, "go", by=alice)
    assert not WorkflowSignal.objects.exists()
    assert lines(caplog) == []  # nothing done, nothing logged


def test_without_the_admin_app_only_the_log_line_is_written(
    alice: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    monkeypatch.setattr(
        operations.apps, "is_installed", lambda name: name != "django.contrib.admin"
    )
    run = WorkflowRunFactory(waiting=True)
    weft.cancel(run.pk, by=alice)
    assert not LogEntry.objects.exists()
    assert lines(caplog) == [f"cancelled run {run.pk} by alice"]


def test_refused_operations_record_nothing(alice: User, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    done = WorkflowRunFactory(completed=True)
    with pytest.raises(WorkflowTerminalError):
        weft.cancel(done.pk, reason="x", by=alice)
    assert error_message(done.pk) is None
    assert not LogEntry.objects.exists() and lines(caplog) == []


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"reason": "x" * (operations.MAX_REASON_LENGTH + 1)}, ValueError),
        ({"reason": 42}, TypeError),
        ({"by": "x" * (operations.MAX_ACTOR_LENGTH + 1)}, ValueError),
        ({"by": 42}, TypeError),
    ],
)
def test_bad_reasons_and_actors_are_refused_before_anything_changes(
    kwargs: dict[str, Any], error: type[Exception]
) -> None:
    run = WorkflowRunFactory(waiting=True)
    with pytest.raises(error):
        weft.cancel(run.pk, **kwargs)
    with pytest.raises(error):
        operations.batch("suspend", [run.pk], **kwargs)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.WAITING


def test_a_reason_at_the_limit_is_kept_whole() -> None:
    run = WorkflowRunFactory(waiting=True)
    reason = "r" * operations.MAX_REASON_LENGTH
    weft.cancel(run.pk, reason=reason)
    assert error_message(run.pk) == f"cancelled by an operator: {reason}"


# -- which operation applies to which status -----------------------------------------

EXPECTED = {
    RunStatus.PENDING: ["cancel", "suspend", "signal", "purge"],
    RunStatus.RUNNING: ["cancel", "suspend", "signal", "purge"],
    RunStatus.WAITING: ["cancel", "suspend", "signal", "purge"],
    RunStatus.SUSPENDED: ["cancel", "resume", "signal", "purge"],
    RunStatus.COMPLETED: ["purge"],
    RunStatus.FAILED: ["purge"],
    RunStatus.CANCELLED: ["purge"],
    RunStatus.TIMED_OUT: ["purge"],
}


def test_every_status_is_covered() -> None:
    assert set(EXPECTED) == set(RunStatus.values)


@pytest.mark.parametrize("status", list(EXPECTED))
def test_applicable_operations(status: str) -> None:
    assert operations.applicable(status) == EXPECTED[status]


def call(operation: str, run_id: str) -> None:
    args = ("go",) if operation == "signal" else ()
    operations.operation_function(operation)(run_id, *args)


@pytest.mark.parametrize("operation", list(operations.APPLIES_TO))
@pytest.mark.parametrize("status", list(EXPECTED))
def test_the_runtime_agrees_with_applies_to(operation: str, status: str) -> None:
    """Where APPLIES_TO says no, the operation raises exactly :func:`refusal`'s error."""
    run = WorkflowRunFactory(status=status)
    refusal = operations.refusal(operation, run.pk, status)
    if refusal is None:
        call(operation, run.pk)
        return
    with pytest.raises(WeftError) as raised:
        call(operation, run.pk)
    assert type(raised.value) is type(refusal)
    assert str(raised.value) == str(refusal)
    assert WorkflowRun.objects.get(pk=run.pk).status == status


@pytest.mark.parametrize(
    ("operation", "status", "message"),
    [
        ("suspend", RunStatus.SUSPENDED, "Workflow run 'r' is already suspended."),
        ("cancel", RunStatus.CANCELLED, "Workflow run 'r' is already cancelled."),
        (
            "cancel",
            RunStatus.COMPLETED,
            "Workflow run 'r' is completed; a run that is completed cannot be cancelled.",
        ),
        (
            "suspend",
            RunStatus.FAILED,
            "Workflow run 'r' is failed; a run that is failed cannot be suspended.",
        ),
        (
            "resume",
            RunStatus.WAITING,
            "Workflow run 'r' is waiting, not suspended: only a suspended run can be resumed.",
        ),
        ("signal", RunStatus.COMPLETED, "Workflow run 'r' is completed; it accepts no more input."),
    ],
)
def test_refusal_messages_say_what_is_true(operation: str, status: str, message: str) -> None:
    WorkflowRunFactory(id="r", status=status)
    with pytest.raises(WeftError) as raised:
        call(operation, "r")
    assert str(raised.value) == message


# -- batches -------------------------------------------------------------------------


def test_a_batch_records_each_run_it_changed(alice: User, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    live = WorkflowRunFactory(id="b-live", waiting=True)
    done = WorkflowRunFactory(id="b-done", completed=True)
    result = operations.batch("cancel", [live.pk, done.pk, "b-missing"], reason="cleanup", by=alice)
    assert result.done == ["b-live"]
    assert [(run_id, type(exc).__name__) for run_id, exc in result.failed] == [
        ("b-done", "WorkflowTerminalError"),
        ("b-missing", "WorkflowNotFoundError"),
    ]
    assert [e[1] for e in entries()] == ["b-live"]
    assert lines(caplog) == ["cancelled run b-live by alice: cleanup"]


def test_a_signal_batch(alice: User) -> None:
    runs = [WorkflowRunFactory(waiting=True) for _ in range(2)]
    WorkflowSignalFactory(run=runs[0], name="other")
    result = operations.batch("signal", [r.pk for r in runs], "go", {"n": 1}, by=alice)
    assert result.done == [r.pk for r in runs]
    assert WorkflowSignal.objects.filter(name="go").count() == 2
    assert LogEntry.objects.count() == 2
