"""Admin actions on runs: they call the public API, are permission-gated, report back."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.factories import EngineFactory, WorkflowEventFactory, WorkflowRunFactory
from weft_django.models import Claim, Engine, RunStatus, WorkflowRun

pytestmark = pytest.mark.django_db

URL = reverse("admin:weft_django_workflowrun_changelist")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def post_action(client: Any, action: str, *ids: str) -> Any:
    return client.post(
        URL, {"action": action, "_selected_action": list(ids), "index": 0}, follow=True
    )


def confirm_action(client: Any, action: str, *ids: str, **extra: str) -> Any:
    """The confirmation page's "Yes" (cancel and purge ask first)."""
    data = {"action": action, "_selected_action": list(ids), "post": "yes", **extra}
    return client.post(URL, data, follow=True)


def test_cancel_action_rotates_the_epoch_and_reports(admin_client: Any) -> None:
    engine = EngineFactory()
    run = WorkflowRunFactory(waiting=True, claim=engine, claim__epoch=3)
    response = confirm_action(admin_client, "cancel_runs", run.pk)
    run.refresh_from_db()
    claim = Claim.objects.get(workflow_id=run.pk)
    assert run.status == RunStatus.CANCELLED
    assert (claim.epoch, claim.holder_id) == (4, None)
    assert Engine.objects.get(pk=engine.pk).revocations == 1
    assert "Cancelled 1 run(s)" in response.content.decode()


def test_suspend_then_resume_actions(admin_client: Any) -> None:
    run = WorkflowRunFactory(waiting=True)
    post_action(admin_client, "suspend_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.SUSPENDED
    post_action(admin_client, "resume_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status in (RunStatus.PENDING, RunStatus.WAITING)


def test_purge_asks_for_confirmation_listing_what_goes(admin_client: Any) -> None:
    run = WorkflowRunFactory(waiting=True, claim=True)
    WorkflowEventFactory.create_batch(3, run=run)
    before = Claim.objects.get(workflow_id=run.pk).epoch
    response = post_action(admin_client, "purge_runs", run.pk)
    content = response.content.decode()
    assert "weft-purge-confirmation" in content
    assert response.templates[0].name == "admin/weft_django/workflowrun/purge_confirmation.html"
    rows = list(response.context["runs"])
    assert [(r.pk, r.event_count, r.signal_count) for r in rows] == [(run.pk, 3, 0)]
    assert WorkflowRun.objects.filter(pk=run.pk).exists()  # nothing deleted yet

    confirm = admin_client.post(
        URL,
        {"action": "purge_runs", "_selected_action": [run.pk], "post": "yes"},
        follow=True,
    )
    assert not WorkflowRun.objects.filter(pk=run.pk).exists()
    assert Claim.objects.get(workflow_id=run.pk).epoch == before + 1
    assert "Purged 1 run(s)" in confirm.content.decode()


def test_refusals_are_reported_per_run_and_change_nothing(admin_client: Any) -> None:
    done = WorkflowRunFactory(status=RunStatus.COMPLETED)
    live = WorkflowRunFactory(waiting=True)
    response = confirm_action(admin_client, "cancel_runs", done.pk, live.pk)
    content = response.content.decode()
    assert f"{done.pk}" in content and "completed" in content
    assert WorkflowRun.objects.get(pk=done.pk).status == RunStatus.COMPLETED
    assert WorkflowRun.objects.get(pk=live.pk).status == RunStatus.CANCELLED


def staff(client: Any, *codenames: str) -> User:
    user = User.objects.create_user("staff", password="pw", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return user


def test_actions_need_the_operate_permission(client: Any) -> None:
    staff(client, "view_workflowrun", "change_workflowrun")  # change is not enough
    run = WorkflowRunFactory(waiting=True)
    page = client.get(URL).content.decode()
    assert "cancel_runs" not in page and "purge_runs" not in page
    post_action(client, "cancel_runs", run.pk)
    post_action(client, "purge_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.WAITING


def test_operate_permission_allows_suspend_but_not_cancel_or_purge(client: Any) -> None:
    staff(client, "view_workflowrun", "operate_workflowrun")
    run = WorkflowRunFactory(waiting=True)
    page = client.get(URL).content.decode()
    assert "suspend_runs" in page
    assert "cancel_runs" not in page and "purge_runs" not in page
    confirm_action(client, "purge_runs", run.pk)
    assert WorkflowRun.objects.filter(pk=run.pk).exists()
    confirm_action(client, "cancel_runs", run.pk)  # cancel is irreversible: delete too
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    post_action(client, "suspend_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.SUSPENDED


def test_cancel_needs_operate_and_delete(client: Any) -> None:
    staff(client, "view_workflowrun", "operate_workflowrun", "delete_workflowrun")
    run = WorkflowRunFactory(waiting=True)
    assert "cancel_runs" in client.get(URL).content.decode()
    confirm_action(client, "cancel_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED


def test_purge_needs_the_delete_permission(client: Any) -> None:
    staff(client, "view_workflowrun", "delete_workflowrun")
    run = WorkflowRunFactory(waiting=True)
    page = client.get(URL).content.decode()
    assert "purge_runs" in page and "cancel_runs" not in page
    client.post(URL, {"action": "purge_runs", "_selected_action": [run.pk], "post": "yes"})
    assert not WorkflowRun.objects.filter(pk=run.pk).exists()
    # No Django delete view or delete_selected bypasses the API (and its epoch rotation).
    assert "delete_selected" not in page


def test_any_failure_is_reported_per_run_and_the_batch_goes_on(
    admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from weft_django import operations

    runs = [WorkflowRunFactory(id=f"batch-{n}", waiting=True) for n in range(3)]
    real_cancel = operations.cancel

    def cancel(workflow_id: str, **kwargs: Any) -> None:
        if workflow_id == "batch-1":
            raise RuntimeError("disk on fire")
        real_cancel(workflow_id, **kwargs)

    monkeypatch.setattr(operations, "cancel", cancel)
    response = confirm_action(admin_client, "cancel_runs", *[run.pk for run in runs])
    content = response.content.decode()
    assert "Cancelled 2 run(s): batch-0, batch-2" in content
    assert "batch-1: RuntimeError: disk on fire" in content  # "Run batch-1: ..."
    statuses = dict(WorkflowRun.objects.values_list("pk", "status"))
    assert statuses == {
        "batch-0": RunStatus.CANCELLED,
        "batch-1": RunStatus.WAITING,
        "batch-2": RunStatus.CANCELLED,
    }


def test_a_batch_over_the_limit_is_refused_with_nothing_changed(admin_client: Any) -> None:
    from weft_django.admin.actions import MAX_ACTION_RUNS

    WorkflowRun.objects.bulk_create(
        [
            WorkflowRun(id=f"many-{n:04d}", workflow_name="shop.x", status=RunStatus.WAITING)
            for n in range(MAX_ACTION_RUNS + 1)
        ]
    )
    response = admin_client.post(
        URL,
        {"action": "cancel_runs", "_selected_action": ["many-0000"], "select_across": "1"},
        follow=True,
    )
    assert f"Select at most {MAX_ACTION_RUNS} runs" in response.content.decode()
    assert not WorkflowRun.objects.filter(status=RunStatus.CANCELLED).exists()
    # At the limit it goes through.
    WorkflowRun.objects.filter(pk="many-0000").delete()
    post = {"action": "suspend_runs", "_selected_action": ["many-0001"], "select_across": "1"}
    admin_client.post(URL, post)
    assert WorkflowRun.objects.filter(status=RunStatus.SUSPENDED).count() == MAX_ACTION_RUNS


def test_actions_need_the_operate_permission_granted_later(client: Any) -> None:
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    client.force_login(viewer)
    run = WorkflowRunFactory(waiting=True)
    page = client.get(URL).content.decode()
    assert "cancel_runs" not in page
    post_action(client, "cancel_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.WAITING

    for codename in ("operate_workflowrun", "delete_workflowrun"):
        viewer.user_permissions.add(Permission.objects.get(codename=codename))
    viewer = User.objects.get(pk=viewer.pk)  # drop the permission cache
    client.force_login(viewer)
    assert "cancel_runs" in client.get(URL).content.decode()
    confirm_action(client, "cancel_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED
