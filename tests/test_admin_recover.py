"""The run page's retry, fork and cancel-with-children: links, confirmation
pages, permissions, the audit trail."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.urls import reverse

import weft_django as weft
from tests.runtime import workflows
from weft_django.models import RunStatus, WorkflowRun
from weft_django.testing import WorkflowDriver

assert workflows  # registered

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def page(run_id: str) -> str:
    return reverse("admin:weft_django_workflowrun_change", args=[run_id])


def recover(run_id: str, verb: str) -> str:
    return reverse("admin:weft_django_workflowrun_recover", args=[run_id, verb])


def test_retry_and_fork_through_their_confirmation_pages(
    admin_client: Any, driver: WorkflowDriver
) -> None:
    weft.start("tests.steps", 2, workflow_id="s")
    driver.run_until_idle()
    body = admin_client.get(page("s")).content.decode()
    assert recover("s", "fork") in body
    assert recover("s", "retry") not in body  # completed: not retryable
    weft.start("tests.steps", 1, workflow_id="live")
    assert recover("live", "cancel_tree") not in admin_client.get(page("live")).content.decode()
    assert "Fork from a step" in admin_client.get(recover("s", "fork")).content.decode()
    response = admin_client.post(recover("s", "fork"), {"from_step": "1", "reason": "fix"})
    forked = WorkflowRun.objects.get(origin_id="s")
    assert response.status_code == 302 and response.url == page(forked.pk)
    assert forked.origin_step == 1
    assert "Forked at step 1 from" in admin_client.get(page(forked.pk)).content.decode()
    assert forked.pk in admin_client.get(page("s")).content.decode()
    entry = LogEntry.objects.get(object_id="s")
    assert entry.change_message == f"Forked from step 1 as {forked.pk}. Reason: fix"
    refused = admin_client.post(recover("s", "fork"), {"from_step": "7"})
    assert "WorkflowForkError" in refused.content.decode()
    weft.start("tests.steps", 1, workflow_id="c")
    weft.cancel("c")
    response = admin_client.post(recover("c", "retry"), {"reason": ""})
    assert WorkflowRun.objects.get(origin_id="c").status == RunStatus.PENDING
    assert response.status_code == 302


def test_cancel_with_children(admin_client: Any, driver: WorkflowDriver) -> None:
    weft.start("tests.tree", 3, workflow_id="t")
    driver.run_until_idle()
    assert recover("t", "cancel_tree") in admin_client.get(page("t")).content.decode()
    admin_client.post(recover("t", "cancel_tree"), {"reason": "all"})
    assert set(WorkflowRun.objects.values_list("status", flat=True)) == {RunStatus.CANCELLED}
    assert LogEntry.objects.count() == 3


def test_permissions(client: Any, driver: WorkflowDriver) -> None:
    weft.start("tests.steps", 1, workflow_id="s")
    driver.run_until_idle()
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_workflowrun", "operate_workflowrun"])
    )
    client.login(username="viewer", password="pw")
    assert recover("s", "fork") not in client.get(page("s")).content.decode()
    assert client.post(recover("s", "fork"), {"from_step": "0"}).status_code == 403
    assert client.get(recover("missing", "fork")).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="add_workflowrun"))
    assert client.get(recover("s", "fork")).status_code == 200
    assert client.get(recover("missing", "fork")).status_code == 404
    assert client.get(recover("s", "nope")).status_code == 404
    assert not WorkflowRun.objects.filter(origin_id="s").exists()
