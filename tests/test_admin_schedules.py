"""The schedules' admin: listed with next and last firing and the run's link;
pause / resume / trigger now through the audited operations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.urls import reverse

import weft_django as weft
from weft_django import Context
from weft_django.models import Schedule, WorkflowRun

pytestmark = pytest.mark.django_db

URL = reverse("admin:weft_django_schedule_changelist")


@weft.workflow(name="tas.report")
def tas_report(ctx: Context) -> None:
    return None


@pytest.fixture(autouse=True)
def declared(weft_settings: Callable[..., None], settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    weft_settings(SCHEDULES={"nightly": {"workflow": "tas.report", "cron": "0 3 * * *"}})


def act(client: Any, action: str, **extra: str) -> Any:
    row = Schedule.objects.get(name="nightly")
    data = {"action": action, "_selected_action": [row.pk], "index": 0, **extra}
    return client.post(URL, data, follow=True)


def test_pause_resume_and_trigger_from_the_admin(admin_client: Any) -> None:
    weft.pause_schedule("nightly")  # creates the row (no worker synced it yet)
    weft.resume_schedule("nightly")
    page = admin_client.get(URL).content.decode()
    assert "nightly" in page and "0 3 * * *" in page and "active" in page
    act(admin_client, "pause_schedules", reason="maintenance window")
    assert Schedule.objects.get().paused
    entry = LogEntry.objects.get()
    assert entry.change_message == "Paused. Reason: maintenance window"
    assert "paused" in admin_client.get(URL).content.decode()
    act(admin_client, "resume_schedules")
    assert not Schedule.objects.get().paused
    act(admin_client, "trigger_schedules")
    row = Schedule.objects.get()
    assert WorkflowRun.objects.filter(pk=row.last_run_id).exists()
    change = admin_client.get(reverse("admin:weft_django_schedule_change", args=[row.pk]))
    text = change.content.decode()
    assert reverse("admin:weft_django_workflowrun_change", args=[quote(row.last_run_id)]) in text
    assert "Next firings" in text
    assert LogEntry.objects.count() == 3


def test_the_actions_need_the_operate_permission(client: Any) -> None:
    weft.pause_schedule("nightly")
    user = User.objects.create_user("staff", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_schedule"))
    client.force_login(user)
    assert "resume_schedules" not in client.get(URL).content.decode()
    act(client, "resume_schedules")
    assert Schedule.objects.get().paused
