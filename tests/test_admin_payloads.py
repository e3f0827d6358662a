"""The admin with stored JSON weft does not decode (written before the depth
limit, or by hand with raw SQL): every page shows a placeholder instead of a
500; and the send-signal form refuses a deep payload before parsing it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.urls import reverse

from tests.factories import (
    UpdateRequestFactory,
    WorkflowEventFactory,
    WorkflowRunFactory,
    WorkflowSignalFactory,
    deep_json_text,
    store_raw_json,
)
from weft_django.models import RunStatus, WorkflowSignal

pytestmark = pytest.mark.django_db

UNREADABLE = {"deep": deep_json_text(960), "long number": "[" + "7" * 5000 + "]"}
PLACEHOLDER = "(payload cannot be shown: "


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def unreadable(case: str) -> str:
    if case == "deep" and connection.vendor == "mysql":
        pytest.skip("MariaDB's CHECK (JSON_VALID) refuses JSON this deep: no such row there")
    return UNREADABLE[case]


def url(model: str, view: str = "changelist", *args: Any) -> str:
    return reverse(f"admin:weft_django_{model}_{view}", args=[quote(arg) for arg in args])


def rows_with(text: str) -> dict[str, Any]:
    """A failed run and a waiting one, each with every JSON column unreadable."""
    run = WorkflowRunFactory(id="bad/run", failed=True)
    waiting = WorkflowRunFactory(id="bad/waiting", waiting=True)
    event = WorkflowEventFactory(run=run, seq=0)
    signal = WorkflowSignalFactory(run=waiting)
    update = UpdateRequestFactory(run=waiting)
    for obj, fields in (
        (run, ("args", "kwargs", "result", "error")),
        (waiting, ("args",)),
        (event, ("result", "error")),
        (signal, ("payload",)),
        (update, ("payload", "response", "error")),
    ):
        for field in fields:
            store_raw_json(obj, field, text)
    return {"run": run, "event": event, "signal": signal, "update": update}


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_every_page_shows_a_placeholder_for_json_it_cannot_decode(
    admin_client: Any, case: str
) -> None:
    rows = rows_with(unreadable(case))
    pages = [
        url("workflowrun"),
        url("workflowrun", "change", rows["run"].pk),
        url("workflowrun", "change", "bad/waiting"),
        url("workflowevent"),
        url("workflowevent", "change", rows["event"].pk),
        url("workflowsignal"),
        url("workflowsignal", "change", rows["signal"].pk),
        url("updaterequest"),
        url("updaterequest", "change", rows["update"].pk),
        "/admin/weft_django/overview/",
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        if "change" in page or "overview" in page:  # the pages that show the values
            assert PLACEHOLDER in response.content.decode(), page


def test_the_send_signal_form_refuses_a_deep_payload_before_parsing_it(admin_client: Any) -> None:
    run = WorkflowRunFactory(waiting=True)
    assert run.status == RunStatus.WAITING
    for text in (deep_json_text(5000), '{"a": ' * 5000 + "1" + "}" * 5000, deep_json_text(31)):
        response = admin_client.post(
            url("workflowrun", "signal", run.pk), {"name": "go", "payload": text}
        )
        assert response.status_code == 200
        errors = response.context["form"].errors
        assert "over the limit of 30" in str(errors["payload"]), errors
    # Brackets inside strings are text, not nesting.
    text = '["' + "[" * 5000 + '\\"]", ' + deep_json_text(29) + "]"
    response = admin_client.post(
        url("workflowrun", "signal", run.pk), {"name": "go", "payload": text}
    )
    assert response.status_code == 302
    assert WorkflowSignal.objects.get().payload[0] == "[" * 5000 + '"]'
