"""The admin's operations are audited: a LogEntry for the operator, a log line,
the reason; cancel asks first; the run page offers what its status allows;
payloads are shown as JSON."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from tests.factories import UpdateRequestFactory, WorkflowRunFactory, WorkflowSignalFactory
from weft_django.models import RunStatus, WorkflowRun, WorkflowSignal

pytestmark = pytest.mark.django_db

URL = reverse("admin:weft_django_workflowrun_changelist")
LOGGER = "weft_django.operations"
OPERATOR = ("view_workflowrun", "operate_workflowrun", "delete_workflowrun")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def info_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)


def run_url(run_id: str, view: str = "change", *extra: str) -> str:
    return reverse(f"admin:weft_django_workflowrun_{view}", args=[quote(run_id), *extra])


def login(client: Client, *codenames: str, name: str = "alice") -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return user


def entries() -> list[tuple[str, str, int, str]]:
    return [
        (e.user.get_username(), e.object_id, e.action_flag, e.change_message)
        for e in LogEntry.objects.order_by("pk")
    ]


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def status(run_id: str) -> str:
    return WorkflowRun.objects.get(pk=run_id).status


def text(response: Any) -> str:
    return response.content.decode()


# -- the run page --------------------------------------------------------------------


def test_run_page_suspend_and_resume_are_recorded(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    login(client, *OPERATOR)
    run = WorkflowRunFactory(id="p-1", waiting=True)
    response = client.post(
        run_url(run.pk, "operate", "suspend"), {"reason": "bad deploy"}, follow=True
    )
    assert "Suspended run p-1." in text(response)
    assert status(run.pk) == RunStatus.SUSPENDED
    assert WorkflowRun.objects.get(pk=run.pk).error["message"] == "suspended by alice: bad deploy"
    response = client.post(run_url(run.pk, "operate", "resume"), follow=True)
    assert "Resumed run p-1." in text(response)
    assert entries() == [
        ("alice", "p-1", CHANGE, "Suspended. Reason: bad deploy"),
        ("alice", "p-1", CHANGE, "Resumed (no reason given)."),
    ]
    assert lines(caplog) == ["suspended run p-1 by alice: bad deploy", "resumed run p-1 by alice"]
    # The run's history page and the index's "Recent actions" list them.
    history = text(client.get(run_url(run.pk, "history")))
    assert "Suspended. Reason: bad deploy" in history
    assert "shop.approve_order:p-1" in text(client.get(reverse("admin:index")))


def test_run_page_signal_is_recorded(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    login(client, *OPERATOR)
    run = WorkflowRunFactory(id="p-2", waiting=True)
    client.post(
        run_url(run.pk, "signal"),
        {"name": "decision", "payload": '{"ok": true}', "signal_id": "s1", "reason": "by phone"},
    )
    assert WorkflowSignal.objects.get(run=run).payload == {"ok": True}
    assert entries() == [
        ("alice", "p-2", CHANGE, "Signalled with 'decision' (s1). Reason: by phone")
    ]
    assert lines(caplog) == ["signalled run p-2 by alice with 'decision' (s1): by phone"]


def test_single_cancel_goes_through_its_confirmation_page(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    login(client, *OPERATOR)
    run = WorkflowRunFactory(id="p-3", waiting=True, claim=True)
    page = text(client.get(run_url(run.pk)))
    assert run_url(run.pk, "cancel") in page  # the button is a link to the page
    response = client.get(run_url(run.pk, "cancel"))
    assert response.templates[0].name == "admin/weft_django/workflowrun/cancel_confirmation.html"
    content = text(response)
    assert "weft-cancel-confirmation" in content and "csrfmiddlewaretoken" in content
    assert 'name="reason"' in content and "p-3" in content
    assert [run.pk for run, _ in response.context["entries"]] == ["p-3"]
    assert status(run.pk) == RunStatus.WAITING  # GET changes nothing
    # A POST without the confirmation shows the page again.
    assert client.post(run_url(run.pk, "cancel"), {"reason": "x"}).status_code == 200
    assert status(run.pk) == RunStatus.WAITING
    response = client.post(
        run_url(run.pk, "cancel"), {"post": "yes", "reason": "duplicate"}, follow=True
    )
    assert response.redirect_chain[-1][0] == run_url(run.pk)
    assert "Cancelled 1 run(s): p-3" in text(response)
    assert status(run.pk) == RunStatus.CANCELLED
    assert WorkflowRun.objects.get(pk=run.pk).error["message"] == "cancelled by alice: duplicate"
    assert entries() == [("alice", "p-3", CHANGE, "Cancelled. Reason: duplicate")]
    assert lines(caplog) == ["cancelled run p-3 by alice: duplicate"]


def test_cancel_needs_the_delete_permission_too(client: Client) -> None:
    login(client, "view_workflowrun", "operate_workflowrun")
    run = WorkflowRunFactory(waiting=True)
    assert run_url(run.pk, "cancel") not in text(client.get(run_url(run.pk)))
    assert client.get(run_url(run.pk, "cancel")).status_code == 403
    assert client.post(run_url(run.pk, "cancel"), {"post": "yes"}).status_code == 403
    response = client.post(
        URL, {"action": "cancel_runs", "_selected_action": [run.pk], "post": "yes"}, follow=True
    )
    assert "No action selected" in text(response)
    assert status(run.pk) == RunStatus.WAITING
    assert not LogEntry.objects.exists()


def test_a_too_long_reason_changes_nothing(client: Client) -> None:
    login(client, *OPERATOR)
    run = WorkflowRunFactory(waiting=True)
    long = "x" * 501
    response = client.post(run_url(run.pk, "operate", "suspend"), {"reason": long}, follow=True)
    assert "The reason is too long" in text(response)
    response = client.post(run_url(run.pk, "cancel"), {"post": "yes", "reason": long})
    assert response.status_code == 200 and response.context["form"].errors
    assert status(run.pk) == RunStatus.WAITING and not LogEntry.objects.exists()


OFFERS = {
    RunStatus.PENDING: {"cancel", "suspend", "signal"},
    RunStatus.RUNNING: {"cancel", "suspend", "signal"},
    RunStatus.WAITING: {"cancel", "suspend", "signal"},
    RunStatus.SUSPENDED: {"cancel", "resume", "signal"},
    RunStatus.COMPLETED: set(),
    RunStatus.FAILED: set(),
    RunStatus.CANCELLED: set(),
    RunStatus.TIMED_OUT: set(),
}


def offered(content: str) -> set[str]:
    marks = {
        "cancel": 'class="button weft-cancel"',
        "suspend": 'class="button weft-suspend"',
        "resume": 'class="button weft-resume"',
        "signal": 'id="weft-signal-form"',
    }
    return {op for op, mark in marks.items() if mark in content}


@pytest.mark.parametrize("run_status", list(OFFERS))
def test_run_page_offers_what_the_status_allows(client: Client, run_status: str) -> None:
    login(client, *OPERATOR)
    run = WorkflowRunFactory(status=run_status)
    content = text(client.get(run_url(run.pk)))
    assert offered(content) == OFFERS[run_status]
    assert ("weft-no-operations" in content) == (not OFFERS[run_status])


def test_run_page_offers_only_what_the_user_may_do(client: Client) -> None:
    login(client, "view_workflowrun", "operate_workflowrun")
    run = WorkflowRunFactory(waiting=True)
    assert offered(text(client.get(run_url(run.pk)))) == {"suspend", "signal"}


@pytest.mark.parametrize(
    ("run_status", "view", "message"),
    [
        (RunStatus.SUSPENDED, ("operate", "suspend"), "is already suspended."),
        (RunStatus.WAITING, ("operate", "resume"), "is waiting, not suspended"),
        (RunStatus.COMPLETED, ("operate", "suspend"), "cannot be suspended"),
        (RunStatus.CANCELLED, ("cancel",), "is already cancelled."),
        (RunStatus.FAILED, ("cancel",), "a run that is failed cannot be cancelled"),
        (RunStatus.COMPLETED, ("signal",), "it accepts no more input"),
    ],
)
def test_server_refuses_what_the_status_does_not_allow(
    client: Client, run_status: str, view: tuple[str, ...], message: str
) -> None:
    login(client, *OPERATOR)
    run = WorkflowRunFactory(status=run_status)
    response = client.post(run_url(run.pk, *view), {"post": "yes", "name": "go"}, follow=True)
    assert response.redirect_chain[-1][0] == run_url(run.pk)
    assert message in text(response)
    assert status(run.pk) == run_status
    assert not LogEntry.objects.exists() and not WorkflowSignal.objects.exists()


def test_pending_payloads_are_shown_as_escaped_json(admin_client: Client) -> None:
    run = WorkflowRunFactory(waiting=True)
    WorkflowSignalFactory(run=run, name="go", payload={"b": [1, "<i>x</i>"], "a": None})
    UpdateRequestFactory(run=run, name="add", payload={"sku": "Ünï"})
    content = text(admin_client.get(run_url(run.pk)))
    signal = '{\n  "a": null,\n  "b": [\n    1,\n    "<i>x</i>"\n  ]\n}'
    assert f'<pre class="weft-json">{escape(signal)}</pre>' in content
    assert "&lt;i&gt;x&lt;/i&gt;" in content and "<i>x</i>" not in content
    update = '{\n  "sku": "Ünï"\n}'
    assert f'<pre class="weft-json">{escape(update)}</pre>' in content
    assert "&#x27;b&#x27;" not in content  # not Python's repr


# -- the run list's actions ----------------------------------------------------------


def action(client: Client, name: str, *ids: str, **extra: str) -> Any:
    data = {"action": name, "_selected_action": list(ids), "index": 0, **extra}
    return client.post(URL, data, follow=True)


def test_batch_suspend_and_resume_record_the_action_bar_reason(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    login(client, *OPERATOR)
    runs = [WorkflowRunFactory(id=f"b-{n}", waiting=True) for n in range(2)]
    ids = [r.pk for r in runs]
    assert 'name="reason"' in text(client.get(URL))  # the action bar has the field
    response = action(client, "suspend_runs", *ids, reason="db maintenance")
    assert "Suspended 2 run(s): b-0, b-1" in text(response)
    response = action(client, "suspend_runs", "b-0")
    messages = [str(m) for m in response.context["messages"]]
    assert "run b-0: WorkflowTerminalError: Workflow run 'b-0' is already suspended." in messages
    action(client, "resume_runs", *ids)
    assert entries() == [
        ("alice", "b-0", CHANGE, "Suspended. Reason: db maintenance"),
        ("alice", "b-1", CHANGE, "Suspended. Reason: db maintenance"),
        ("alice", "b-0", CHANGE, "Resumed (no reason given)."),
        ("alice", "b-1", CHANGE, "Resumed (no reason given)."),
    ]
    assert lines(caplog)[:2] == [
        "suspended run b-0 by alice: db maintenance",
        "suspended run b-1 by alice: db maintenance",
    ]


def test_batch_cancel_confirms_then_records(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    login(client, *OPERATOR)
    live = WorkflowRunFactory(id="c-live", waiting=True)
    done = WorkflowRunFactory(id="c-done", completed=True)
    page = action(client, "cancel_runs", live.pk, done.pk, reason="from the bar")
    assert page.templates[0].name == "admin/weft_django/workflowrun/cancel_confirmation.html"
    content = text(page)
    assert "Cancel 2 run(s)?" in content and "1 of these runs will be refused" in content
    assert 'value="from the bar"' in content  # the action bar's reason is carried over
    assert status(live.pk) == RunStatus.WAITING and not LogEntry.objects.exists()
    response = action(client, "cancel_runs", live.pk, done.pk, post="yes", reason="stale orders")
    messages = [str(m) for m in response.context["messages"]]
    assert messages == [
        "Cancelled 1 run(s): c-live",
        "1 run(s) failed, nothing changed for them:",
        "run c-done: WorkflowTerminalError: Workflow run 'c-done' is completed; "
        "a run that is completed cannot be cancelled.",
    ]
    assert entries() == [("alice", "c-live", CHANGE, "Cancelled. Reason: stale orders")]
    assert lines(caplog) == ["cancelled run c-live by alice: stale orders"]
    assert (
        WorkflowRun.objects.get(pk=live.pk).error["message"] == "cancelled by alice: stale orders"
    )


def test_batch_purge_records_a_deletion(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    login(client, *OPERATOR)
    run = WorkflowRunFactory(id="gone", completed=True)
    page = action(client, "purge_runs", run.pk)
    assert 'name="reason"' in text(page)
    action(client, "purge_runs", run.pk, post="yes", reason="retention")
    assert not WorkflowRun.objects.filter(pk="gone").exists()
    assert entries() == [("alice", "gone", DELETION, "Purged. Reason: retention")]
    assert lines(caplog) == ["purged run gone by alice: retention"]
