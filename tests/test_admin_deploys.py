"""The admin and safe deploys: the run page shows a run's version and, when a
change suspended it, the divergence; the timeline shows patch markers."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

import weft_django as weft
from tests.runtime.workflows import STATE
from weft_django.testing import WorkflowDriver


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def run_page(client: Any, run_id: str) -> str:
    url = reverse("admin:weft_django_workflowrun_change", args=[quote(run_id)])
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_run_page_shows_the_divergence_and_the_patch_marker(
    admin_client: Any, driver: WorkflowDriver
) -> None:
    weft.start("tests.patchable", workflow_id="old")
    driver.run_until_idle()
    STATE["patch"] = "patched"
    weft.start("tests.patchable", workflow_id="new")
    driver.run_until_idle()
    page = run_page(admin_client, "new")
    assert "patch add-extra: the run takes its new path" in page
    assert '<span class="weft-run-version">v1</span>' in page

    STATE["patch"] = "reordered"
    weft.signal("old", "go")
    driver.run_until_idle()
    page = run_page(admin_client, "old")
    assert 'class="weft-suspended-error weft-bad"' in page
    assert "is not deterministic at operation #1" in page
    assert "history recorded wait(&#x27;signal:go&#x27;)" in page
