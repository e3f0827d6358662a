"""``manage.py weft_operate``: the operations from the terminal, recorded as
from the admin (weft_django.operations)."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.factories import WorkflowRunFactory
from weft_django.models import RunStatus, WorkflowRun, WorkflowSignal

pytestmark = pytest.mark.django_db


def operate(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("weft_operate", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_cancel_by_a_user_writes_their_log_entry(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "weft_django.operations")
    User.objects.create_user("alice")
    run = WorkflowRunFactory(id="t-1", waiting=True)
    out, _ = operate("cancel", run.pk, "--reason", "dup", "--user", "alice", "--yes")
    assert out == "cancelled t-1\n"
    assert WorkflowRun.objects.get(pk=run.pk).error["message"] == "cancelled by alice: dup"
    entry = LogEntry.objects.get()
    assert (entry.user.username, entry.action_flag, entry.change_message) == (
        "alice",
        CHANGE,
        "Cancelled. Reason: dup",
    )
    assert "cancelled run t-1 by alice: dup" in caplog.messages


def test_without_a_user_the_login_name_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "ops")
    run = WorkflowRunFactory(waiting=True)
    operate("suspend", run.pk, "--reason", "maintenance")
    assert WorkflowRun.objects.get(pk=run.pk).error["message"] == "suspended by ops: maintenance"
    assert not LogEntry.objects.exists()
    operate("resume", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.PENDING


def test_signal_and_purge() -> None:
    User.objects.create_user("alice")
    run = WorkflowRunFactory(waiting=True)
    operate("signal", run.pk, "--name", "decision", "--payload", '{"ok": true}', "--user", "alice")
    assert WorkflowSignal.objects.get(run=run).payload == {"ok": True}
    operate("purge", run.pk, "--user", "alice", "--yes")
    assert not WorkflowRun.objects.filter(pk=run.pk).exists()
    assert list(LogEntry.objects.order_by("pk").values_list("action_flag", flat=True)) == [
        CHANGE,
        DELETION,
    ]


def test_each_run_is_reported_and_a_failure_exits_1() -> None:
    live = WorkflowRunFactory(id="t-live", waiting=True)
    done = WorkflowRunFactory(id="t-done", completed=True)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("weft_operate", "suspend", live.pk, done.pk, stdout=out, stderr=err)
    assert raised.value.returncode == 1
    assert out.getvalue() == "suspended t-live\n"
    assert "failed t-done: WorkflowTerminalError" in err.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("cancel", "x"), "pass --yes"),
        (("purge", "x"), "pass --yes"),
        (("cancel", "x", "--yes", "--user", "nobody"), "no user 'nobody'"),
        (("signal", "x"), "needs --name"),
        (("signal", "x", "--name", "n", "--payload", "{"), "not valid JSON"),
        (("suspend", "x", "--reason", "r" * 501), "limit is 500"),
    ],
)
def test_refusals_change_nothing(args: tuple[str, ...], message: str, monkeypatch: Any) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO())  # not a terminal: nobody to ask
    WorkflowRunFactory(id="x", waiting=True)
    with pytest.raises(CommandError, match=message):
        operate(*args)
    assert WorkflowRun.objects.get(pk="x").status == RunStatus.WAITING
