"""Admin actions on runs: they call the public API, are permission-gated, report back."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.factories import EngineFactory, WorkflowRunFactory
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


def test_cancel_action_rotates_the_epoch_and_reports(admin_client: Any) -> None:
    engine = EngineFactory()
    run = WorkflowRunFactory(waiting=True, claim=engine, claim__epoch=3)
    response = post_action(admin_client, "cancel_runs", run.pk)
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


def test_purge_action_deletes_the_run_but_keeps_the_epoch(admin_client: Any) -> None:
    run = WorkflowRunFactory(waiting=True, claim=True)
    before = Claim.objects.get(workflow_id=run.pk).epoch
    post_action(admin_client, "purge_runs", run.pk)
    assert not WorkflowRun.objects.filter(pk=run.pk).exists()
    assert Claim.objects.get(workflow_id=run.pk).epoch == before + 1


def test_refusals_are_reported_per_run_and_change_nothing(admin_client: Any) -> None:
    done = WorkflowRunFactory(status=RunStatus.COMPLETED)
    live = WorkflowRunFactory(waiting=True)
    response = post_action(admin_client, "cancel_runs", done.pk, live.pk)
    content = response.content.decode()
    assert f"{done.pk}" in content and "completed" in content
    assert WorkflowRun.objects.get(pk=done.pk).status == RunStatus.COMPLETED
    assert WorkflowRun.objects.get(pk=live.pk).status == RunStatus.CANCELLED


def test_actions_need_the_change_permission(client: Any) -> None:
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    client.force_login(viewer)
    run = WorkflowRunFactory(waiting=True)
    page = client.get(URL).content.decode()
    assert "cancel_runs" not in page
    post_action(client, "cancel_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.WAITING

    viewer.user_permissions.add(Permission.objects.get(codename="change_workflowrun"))
    viewer = User.objects.get(pk=viewer.pk)  # drop the permission cache
    client.force_login(viewer)
    assert "cancel_runs" in client.get(URL).content.decode()
    post_action(client, "cancel_runs", run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED
