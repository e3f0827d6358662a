"""``manage.py weft`` through ``call_command``: every subcommand, ``--json``
parsed, the exit statuses (0 ok, 1 refused, 2 usage, 3 not found)."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

import weft_django as weft
from tests.factories import ClaimFactory, EngineFactory, WorkflowRunFactory
from tests.runtime import workflows as runtime_workflows
from tests.updates import workflows as update_workflows
from weft_django.console import listing
from weft_django.models import RunStatus, WorkflowRun
from weft_django.testing import WorkflowDriver

assert runtime_workflows and update_workflows  # registered


def weft_cli(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("weft", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def as_json(*args: str) -> Any:
    return json.loads(weft_cli(*args, "--json")[0])


def exit_status(*args: str) -> int:
    with pytest.raises(CommandError) as raised:
        weft_cli(*args)
    assert "\n" not in str(raised.value)
    return raised.value.returncode


@pytest.mark.django_db
def test_runs_pages_by_cursor_and_filters() -> None:
    engine = EngineFactory()
    for index in range(5):
        WorkflowRunFactory(id=f"r{index}", created_at=weft_now() - timedelta(minutes=index))
    WorkflowRunFactory(id="w", workflow_name="other", status=RunStatus.FAILED, claim=engine)
    first = as_json("runs", "--limit", "4")
    assert [row["id"] for row in first["rows"]] == ["w", "r0", "r1", "r2"]
    second = as_json("runs", "--limit", "4", "--cursor", first["next_cursor"])
    assert [row["id"] for row in second["rows"]] == ["r3", "r4"]
    assert second["next_cursor"] is None
    assert [r["id"] for r in as_json("runs", "--status", "failed")["rows"]] == ["w"]
    assert [r["id"] for r in as_json("runs", "--workflow", "other")["rows"]] == ["w"]
    assert [r["id"] for r in as_json("runs", "--owner", engine.id)["rows"]] == ["w"]
    assert as_json("runs", "--owner", engine.id)["rows"][0]["owner"] == engine.id
    assert [r["id"] for r in as_json("runs", "--older-than", "150s")["rows"]] == ["r3", "r4"]
    assert len(as_json("runs", "--newer-than", "1h", "--version", "1")["rows"]) == 6
    text, _ = weft_cli("runs", "--limit", "1")
    assert text.splitlines()[0].split() == [
        "ID", "WORKFLOW", "VERSION", "STATUS", "OWNER", "CREATED_AT", "UPDATED_AT", "ORIGIN"
    ]  # fmt: skip
    assert "next page: --cursor " in text
    assert exit_status("runs", "--cursor", "garbage") == 2
    assert exit_status("runs", "--limit", "0") == 2
    assert exit_status("runs", "--older-than", "soon") == 2
    assert exit_status("runs", "--status", "nope") == 2
    assert exit_status() == 2


def weft_now() -> Any:
    from weft_django.ownership import db_now

    return db_now()


def test_describe_history_query_and_update(driver: WorkflowDriver) -> None:
    weft.start("tests.updates.counter", workflow_id="c")
    driver.run_until_idle()
    weft.signal("c", "nope")
    found = as_json("describe", "c")
    assert (found["status"], found["waiting_on"]["kind"]) == ("waiting", "signal")
    assert found["owner_engine_id"] == driver.engine.engine_id
    assert found["lease_left"] > 0
    assert found["pending_signal_names"] == ["nope"]
    assert "lease_left" in weft_cli("describe", "c")[0]
    assert as_json("query", "c", "items", "1", "two")["args"] == [1, "two"]
    # No owner answers inside this test: the update times out (refused: 1).
    assert exit_status("update", "c", "add", "3", "--timeout", "0") == 1
    assert exit_status("update", "c", "add", "{bad", "--timeout", "0") == 2
    assert exit_status("query", "c", "unknown") == 1
    weft.start("tests.steps", 3, workflow_id="s")
    driver.run_until_idle()
    page = as_json("history", "s", "--limit", "2")
    assert [row["name"] for row in page["rows"]] == ["s0", "s1"]
    rest = as_json("history", "s", "--after", page["next_cursor"])
    assert [row["name"] for row in rest["rows"]] == ["s2"]
    assert rest["next_cursor"] is None
    assert "step s0" in weft_cli("history", "s")[0]
    for command in ("describe", "history"):
        assert exit_status(command, "missing") == 3
    assert exit_status("describe", "") == 2  # an id no run can have


@pytest.mark.django_db
def test_operations_are_audited_with_the_user() -> None:
    User.objects.create_user("alice")
    WorkflowRunFactory(id="a", waiting=True)
    WorkflowRunFactory(id="b", waiting=True)
    rows = as_json("suspend", "a", "b", "--reason", "maint", "--as", "alice")
    assert [(r["run"], r["done"]) for r in rows] == [("a", True), ("b", True)]
    assert LogEntry.objects.filter(user__username="alice").count() == 2
    as_json("resume", "a", "--as", "alice")
    assert WorkflowRun.objects.get(pk="a").status == RunStatus.PENDING  # no history
    out = as_json("signal", "a", "go", '{"ok": true}', "--as", "alice", "--reason", "r")
    assert out[0]["done"] is True
    assert exit_status("resume", "a") == 1  # not suspended
    assert exit_status("resume", "a", "missing") == 1  # one refused, one missing
    assert exit_status("resume", "missing") == 3
    assert exit_status("cancel", "a") == 2  # irreversible: --yes, not a terminal
    as_json("cancel", "a", "--yes", "--as", "alice")
    assert WorkflowRun.objects.get(pk="a").status == RunStatus.CANCELLED
    assert exit_status("cancel", "a", "--yes") == 1  # already cancelled
    assert exit_status("signal", "a", "go") == 1  # finished
    assert exit_status("suspend", "b", "--as", "nobody") == 2
    assert exit_status("signal", "b", "go", "{bad") == 2


def test_cancel_children_retry_and_fork(driver: WorkflowDriver) -> None:
    weft.start("tests.tree", 3, workflow_id="t")
    driver.run_until_idle()
    rows = as_json("cancel", "t", "--children", "--yes")
    assert rows[0]["detail"] == "cancelled with 2 descendant(s)"
    assert set(WorkflowRun.objects.values_list("status", flat=True)) == {RunStatus.CANCELLED}
    assert exit_status("suspend", "t", "--children") == 2
    retried = as_json("retry", "t", "--id", "t2")
    assert retried[0]["new_run"] == "t2"
    assert WorkflowRun.objects.get(pk="t2").origin_id == "t"
    assert exit_status("retry", "t2") == 1  # pending: not failed
    assert exit_status("retry", "nope") == 3
    weft.start("tests.steps", 2, workflow_id="s")
    driver.run_until_idle()
    forked = as_json("fork", "s", "--from-step", "1")[0]["new_run"]
    assert WorkflowRun.objects.get(pk=forked).origin_step == 1
    driver.run_until_idle()
    assert weft.result(forked, timeout=0) == ["s0", "s1"]
    assert exit_status("fork", "s", "--from-step", "9") == 1
    assert exit_status("fork", "s", "--from-step", "-1") == 2
    assert exit_status("fork", "s") == 2
    described = as_json("describe", "s")
    assert described["copies"] == [forked]
    assert as_json("describe", forked)["origin_step"] == 1


@pytest.mark.django_db
def test_engines_and_stuck() -> None:
    live = EngineFactory()
    dead = EngineFactory(expired=True)
    EngineFactory(stopped=True)
    ClaimFactory(holder=live)
    WorkflowRunFactory(
        id="orphan", waiting=True, claim=dead, wake_at=weft_now() - timedelta(hours=1)
    )
    engines = {row["id"]: row for row in as_json("engines")}
    assert set(engines) == {live.id, dead.id}
    assert engines[live.id]["claims_held"] == 1 and engines[live.id]["lease_left"] > 0
    assert engines[dead.id]["lease_left"] < 0
    assert len(as_json("engines", "--all")) == 3
    stuck = as_json("stuck")
    assert [row["run"] for row in stuck["rows"]] == ["orphan"]
    assert stuck["rows"][0]["holder"] == dead.id
    assert [row["run"] for row in stuck["expired_claims"]] == ["orphan"]
    text = weft_cli("stuck")[0]
    assert "1 stuck run(s)" in text
    assert "1 claim(s) held by an expired engine" in text


@pytest.mark.django_db
def test_a_runs_page_is_one_statement(django_assert_num_queries: Any) -> None:
    for index in range(3):
        WorkflowRunFactory(id=f"r{index}")
    first = as_json("runs", "--limit", "2")
    with django_assert_num_queries(1):
        page = listing.runs(limit=2, cursor=first["next_cursor"], statuses=["pending"])
    assert [row["id"] for row in page.rows] == ["r0"]


def test_the_console_never_imports_the_admin() -> None:
    """``manage.py weft`` works in a project without ``django.contrib.admin``:
    nothing it imports, directly or not, is in ``weft_django.admin``."""
    from tests.test_architecture import GRAPH

    seen: set[str] = set()
    todo = ["weft_django.management.commands.weft"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(GRAPH.get(module, ()))
    assert "weft_django.console.listing" in seen
    assert sorted(m for m in seen if m.startswith("weft_django.admin")) == []
