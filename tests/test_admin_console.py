"""The admin as an operator's console: overview, engine and run pages, send-signal,
run buttons, capped counts and constant query counts."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.factories import (
    ClaimFactory,
    EngineFactory,
    UpdateRequestFactory,
    WorkflowEventFactory,
    WorkflowRunFactory,
    WorkflowSignalFactory,
)
from weft_django.admin import overview as overview_module
from weft_django.admin.forms import MAX_FORM_PAYLOAD_BYTES
from weft_django.admin.overview import engine_state
from weft_django.admin.scale import CappedPaginator
from weft_django.conf import get_settings
from weft_django.models import (
    Engine,
    EngineStatus,
    RunStatus,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)

pytestmark = pytest.mark.django_db

OVERVIEW = "/admin/weft_django/overview/"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def run_url(run_id: str, view: str = "change", *extra: str) -> str:
    return reverse(f"admin:weft_django_workflowrun_{view}", args=[quote(run_id), *extra])


def staff(client: Client, *codenames: str, name: str = "staff") -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return user


def old(**delta: float) -> Any:
    return timezone.now() - timedelta(**delta)


def populate(n: int) -> None:
    """``n`` of everything the overview lists."""
    for i in range(n):
        live = EngineFactory(passes={"renew": {"counts": {"renewed": i}, "seconds": 0.01}})
        dead = EngineFactory(expired=True)
        EngineFactory(stopped=True, stopped_at=old(hours=2))
        WorkflowRunFactory(waiting=True, claim=live)
        stuck = WorkflowRunFactory(running=True, claim=dead)
        WorkflowEventFactory.create_batch(2, run=stuck)
        WorkflowRunFactory(suspended=True, updated_at=old(hours=1))
        WorkflowRunFactory(failed=True, updated_at=old(hours=2))
        WorkflowRunFactory(completed=True)
        WorkflowSignalFactory(created_at=old(minutes=10))
        UpdateRequestFactory(created_at=old(minutes=10))


# -- the overview ------------------------------------------------------------------


def test_overview_is_linked_from_the_admin_index(admin_client: Any) -> None:
    assert OVERVIEW in admin_client.get("/admin/").content.decode()
    assert admin_client.get(OVERVIEW).status_code == 200


def test_overview_shows_engines_stuck_claims_and_recent_trouble(admin_client: Any) -> None:
    live = EngineFactory(
        id="eng-live",
        passes={
            "renew": {"counts": {"renewed": 7}, "seconds": 0.002, "succeeded": True},
            "reclaim": {"counts": {"claimed": 2, "busy": 1}, "seconds": 0.01},
            "signal_poll": {"counts": {}, "seconds": 0.0},
            "update_poll": {"counts": {"woken": 3}, "seconds": 0.0},
        },
    )
    dead = EngineFactory(id="eng-dead", expired=True)
    EngineFactory(id="eng-stopped", stopped=True, stopped_at=old(hours=1))
    EngineFactory(id="eng-ancient", stopped=True, stopped_at=old(days=3))
    WorkflowRunFactory(id="held-run", waiting=True, claim=live, claim__epoch=2)
    WorkflowRunFactory(id="stuck-run", running=True, claim=dead, claim__epoch=5)
    WorkflowRunFactory(id="susp-run", suspended=True, updated_at=old(hours=3))
    WorkflowRunFactory(id="susp-old", suspended=True, updated_at=old(days=2))
    WorkflowRunFactory(id="fail-run", failed=True, updated_at=old(hours=3))
    WorkflowSignalFactory(run__id="sig-run", name="late", created_at=old(minutes=5))
    WorkflowSignalFactory(run__id="sig-new", name="fresh")
    UpdateRequestFactory(run__id="upd-run", name="add_item", created_at=old(minutes=5))

    response = admin_client.get(OVERVIEW)
    content = response.content.decode()
    states = {row["engine"].pk: row["state"] for row in response.context["engines"]}
    assert states == {"eng-live": "live", "eng-dead": "dead", "eng-stopped": "stopped"}
    live_row = next(r for r in response.context["engines"] if r["engine"].pk == "eng-live")
    assert live_row["engine"].claims_held == 1 and str(live_row["claims_held"]) == "1"
    assert [p["name"] for p in live_row["passes"]] == [
        "renew",
        "reclaim",
        "signal_poll",
        "update_poll",
    ]
    assert "claimed: 2" in content and "renewed: 7" in content
    assert [c.workflow_id for c in response.context["stuck_claims"]] == ["stuck-run"]
    assert run_url("stuck-run") in content
    assert [r.pk for r in response.context["suspended_runs"]] == ["susp-run"]
    assert [r.pk for r in response.context["failed_runs"]] == ["fail-run"]
    assert [s.run_id for s in response.context["old_signals"]] == ["sig-run"]
    assert [u.run_id for u in response.context["old_updates"]] == ["upd-run"]
    counts = {s["status"]: str(s["count"]) for s in response.context["statuses"]}
    assert counts["suspended"] == "2" and counts["waiting"] == "4"  # held + 3 messaged
    # A shorter threshold lists the fresh signal too.
    fresh = admin_client.get(OVERVIEW + "?older_than=0").context["old_signals"]
    assert {s.run_id for s in fresh} == {"sig-run", "sig-new"}


def test_engine_states_follow_the_lease() -> None:
    timing = get_settings().claim_timing
    now = timezone.now()
    engine = Engine(status=EngineStatus.RUNNING, lease_expires_at=now + timedelta(seconds=29))
    assert engine_state(engine, now, timing) == "live"
    engine.lease_expires_at = now + timedelta(seconds=timing.ttl - 3 * timing.renew_interval)
    assert engine_state(engine, now, timing) == "expiring"
    engine.lease_expires_at = now - timedelta(seconds=timing.expiry_grace + 1)
    assert engine_state(engine, now, timing) == "dead"
    engine.status = EngineStatus.STOPPED
    assert engine_state(engine, now, timing) == "stopped"


def test_overview_counts_are_capped(admin_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overview_module, "STATUS_COUNT_CAP", 3)
    WorkflowRunFactory.create_batch(5, completed=True)
    WorkflowRunFactory.create_batch(2, failed=True)
    response = admin_client.get(OVERVIEW)
    counts = {s["status"]: str(s["count"]) for s in response.context["statuses"]}
    assert counts["completed"] == "3+" and counts["failed"] == "2"
    assert "3+" in response.content.decode()


def test_overview_query_count_is_constant(admin_client: Any) -> None:
    def queries() -> list[str]:
        with CaptureQueriesContext(connection) as ctx:
            assert admin_client.get(OVERVIEW).status_code == 200
        return [q["sql"] for q in ctx.captured_queries]

    populate(1)
    few = queries()
    populate(12)
    many = queries()
    # + the retention summary, the stuck runs (five statements), the last
    # hour's charts (four) and, on PostgreSQL, the planner settings of both
    assert len(few) == len(many) <= 30, many
    # No count of a whole table: every COUNT is over a LIMIT subquery (or one run's
    # claims), or over the last hour's range (the charts: a BETWEEN on an index).
    for sql in many:
        if "COUNT(" in sql.upper() and "weft_django_workflowrun" in sql:
            # SQLite's table sizes: capped counts too
            assert "LIMIT" in sql.upper() or "BETWEEN" in sql.upper(), sql


def test_overview_needs_the_view_permission(client: Client) -> None:
    staff(client)
    assert client.get(OVERVIEW).status_code == 403
    assert OVERVIEW not in client.get("/admin/").content.decode()
    client.logout()
    staff(client, "view_workflowrun", name="viewer")
    assert client.get(OVERVIEW).status_code == 200


def test_overview_shows_table_sizes_and_the_oldest_prunable_run(admin_client: Any) -> None:
    # Kept by default: COMPLETED 7 days, FAILED 30 days. Only the 40-day-old
    # completed run is past its retention.
    WorkflowRunFactory(id="old-run", completed=True, finished_at=old(days=40))
    WorkflowRunFactory(id="older-failed", failed=True, finished_at=old(days=20))
    WorkflowRunFactory(id="fresh-run", completed=True)
    response = admin_client.get(OVERVIEW)
    retention = response.context["retention"]
    assert retention["oldest_prunable"]["workflow_id"] == "old-run"
    assert retention["prunable_runs"] == 1 and not retention["prunable_capped"]
    tables = {t["table"] for t in retention["tables"]}
    assert {"weft_django_workflowrun", "weft_django_workflowevent"} <= tables
    content = response.content.decode()
    assert 'id="weft-retention"' in content and "weft_django_workflowevent" in content
    assert run_url("old-run") in content and run_url("older-failed") not in content


def test_overview_says_when_nothing_is_prunable(admin_client: Any) -> None:
    WorkflowRunFactory(id="fresh-run", completed=True)
    response = admin_client.get(OVERVIEW)
    assert response.context["retention"]["oldest_prunable"] is None
    assert response.context["retention"]["prunable_runs"] == 0


# -- changelists at scale ------------------------------------------------------------


def test_changelists_count_at_most_the_cap(
    admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CappedPaginator, "cap", 5)
    WorkflowRunFactory.create_batch(8, completed=True)
    url = reverse("admin:weft_django_workflowrun_changelist")
    with CaptureQueriesContext(connection) as ctx:
        response = admin_client.get(url + "?status__exact=completed")
    assert response.context["cl"].result_count == 5
    assert response.context["cl"].paginator.capped
    counts = [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counts and all("LIMIT" in sql.upper() for sql in counts), counts


def test_workflow_filter_offers_registered_names_without_distinct(admin_client: Any) -> None:
    WorkflowRunFactory(workflow_name="orders.fulfil_order")
    url = reverse("admin:weft_django_workflowrun_changelist")
    with CaptureQueriesContext(connection) as ctx:
        response = admin_client.get(url)
    assert not [q for q in ctx.captured_queries if "DISTINCT" in q["sql"].upper()]
    assert "?workflow_name=orders.fulfil_order" in response.content.decode()
    filtered = admin_client.get(url + "?workflow_name=orders.fulfil_order")
    assert [r.workflow_name for r in filtered.context["cl"].result_list] == ["orders.fulfil_order"]


def test_event_changelist_filters_kinds_without_distinct(admin_client: Any) -> None:
    run = WorkflowRunFactory(running=True)
    WorkflowEventFactory(run=run, seq=1, kind="step")
    WorkflowEventFactory(run=run, seq=2, kind="wait", name="signal:go")
    url = reverse("admin:weft_django_workflowevent_changelist")
    with CaptureQueriesContext(connection) as ctx:
        response = admin_client.get(url + "?kind=wait")
    assert not [q for q in ctx.captured_queries if "DISTINCT" in q["sql"].upper()]
    assert [e.kind for e in response.context["cl"].result_list] == ["wait"]


# -- the engine page -----------------------------------------------------------------


def test_engine_page_lists_its_claims_paginated(admin_client: Any) -> None:
    engine = EngineFactory(passes={"reclaim": {"counts": {"claimed": 4}, "seconds": 0.1}})
    other = EngineFactory()
    for n in range(130):
        ClaimFactory(workflow_id=f"held-{n:03d}", holder=engine, epoch=n + 1)
    ClaimFactory(workflow_id="not-mine", holder=other)
    url = reverse("admin:weft_django_engine_change", args=[quote(engine.pk)])
    first = admin_client.get(url)
    page = first.context["claims_page"]
    assert page.paginator.count == 130 and len(page.object_list) == 100
    assert not page.paginator.capped
    assert "claimed: 4" in first.content.decode()
    second = admin_client.get(url + "?claims_page=2")
    ids = [c.workflow_id for c in second.context["claims_page"]]
    assert ids == [f"held-{n:03d}" for n in range(100, 130)]
    assert run_url("held-129") in second.content.decode()


# -- the run page --------------------------------------------------------------------


def make_history(run: WorkflowRun, n: int) -> None:
    """``n`` events; the owner changes (engine B, epoch 2) at seq 150."""
    start = timezone.now() - timedelta(hours=1)
    WorkflowEvent.objects.bulk_create(
        [
            WorkflowEvent(
                run=run,
                seq=seq,
                kind="step" if seq % 3 else "wait",
                name=f"step-{seq}" if seq % 3 else "signal:go",
                result={"n": seq} if seq % 3 else {"deadline": None},
                engine_id="engine-A" if seq < 150 else "engine-B",
                epoch=1 if seq < 150 else 2,
                created_at=start + timedelta(seconds=seq),
            )
            for seq in range(1, n + 1)
        ]
    )


def test_run_page_timeline_is_paginated(admin_client: Any) -> None:
    run = WorkflowRunFactory(id="long-run", waiting=True)
    make_history(run, 250)
    with CaptureQueriesContext(connection) as small:
        first = admin_client.get(run_url(run.pk))
    rows = first.context["timeline"]
    assert [r.event.seq for r in rows] == list(range(1, 101))
    assert first.context["events_page"].paginator.num_pages == 3
    step = next(r for r in rows if r.event.seq == 2)
    assert step.took == pytest.approx(1.0) and step.summary.startswith("step step-2")
    wait = next(r for r in rows if r.event.seq == 3)
    assert wait.summary == "waits on signal go"
    assert [r.event.seq for r in rows if r.owner_changed] == [1]
    second = admin_client.get(run_url(run.pk) + "?events_page=2")
    changed = [r for r in second.context["timeline"] if r.owner_changed]
    assert [(r.event.seq, r.previous_owner) for r in changed] == [(150, "engine-A @ epoch 1")]
    assert "engine-B" in second.content.decode()
    # The page boundary: seq 101's duration comes from seq 100 (on the previous page).
    assert second.context["timeline"][0].took == pytest.approx(1.0)
    last = admin_client.get(run_url(run.pk) + "?events_page=3")
    assert [r.event.seq for r in last.context["timeline"]] == list(range(201, 251))
    # A constant number of queries, whatever the history's length.
    make_history(WorkflowRunFactory(id="short-run", waiting=True), 5)
    with CaptureQueriesContext(connection) as few:
        admin_client.get(run_url("short-run"))
    assert len(few.captured_queries) == len(small.captured_queries)


def test_run_page_shows_owner_and_pending_messages(admin_client: Any) -> None:
    engine = EngineFactory(id="eng-own", hostname="own.example")
    run = WorkflowRunFactory(id="owned", waiting=True, claim=engine, claim__epoch=3)
    WorkflowSignalFactory(run=run, name="go", payload={"x": 1})
    WorkflowSignalFactory(run=run, name="done-already", consumed=True)
    UpdateRequestFactory(run=run, name="add_item")
    response = admin_client.get(run_url(run.pk))
    content = response.content.decode()
    assert "eng-own @ own.example" in content
    assert 0 < response.context["holder_lease_left"] <= 30
    assert [s.name for s in response.context["pending_signals"]] == ["go"]
    assert [u.name for u in response.context["pending_updates"]] == ["add_item"]
    assert 'class="weft-epoch">3<' in content
    assert "weft-signal-form" in content and "weft-cancel" in content


def test_run_page_hides_operations_without_the_permission(client: Client) -> None:
    staff(client, "view_workflowrun")
    run = WorkflowRunFactory(waiting=True)
    content = client.get(run_url(run.pk)).content.decode()
    assert "weft-signal-form" not in content and "weft-cancel" not in content
    assert client.post(run_url(run.pk, "operate", "cancel")).status_code == 403
    assert client.post(run_url(run.pk, "operate", "suspend")).status_code == 403
    assert client.get(run_url(run.pk, "cancel")).status_code == 403
    assert client.post(run_url(run.pk, "cancel"), {"post": "yes"}).status_code == 403
    response = client.post(run_url(run.pk, "signal"), {"name": "go", "payload": "1"})
    assert response.status_code == 403
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert not WorkflowSignal.objects.exists()


def test_run_page_buttons(client: Client) -> None:
    staff(client, "view_workflowrun", "operate_workflowrun", "delete_workflowrun")
    run = WorkflowRunFactory(waiting=True, claim=EngineFactory(), claim__epoch=2)
    response = client.post(run_url(run.pk, "operate", "suspend"), follow=True)
    assert response.redirect_chain[-1][0] == run_url(run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.SUSPENDED
    assert response.context["claim"].epoch == 3  # revocation rotated the epoch
    # Cancel goes through its confirmation page: the old button's POST lands there.
    response = client.post(run_url(run.pk, "operate", "cancel"), follow=True)
    assert response.redirect_chain[-1][0] == run_url(run.pk, "cancel")
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.SUSPENDED
    response = client.post(run_url(run.pk, "cancel"), {"post": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == run_url(run.pk)
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert response.context["claim"].epoch == 4


def test_run_page_resume_and_refusals(client: Client) -> None:
    staff(client, "view_workflowrun", "operate_workflowrun", "delete_workflowrun")
    run = WorkflowRunFactory(suspended=True)
    client.post(run_url(run.pk, "operate", "resume"))
    assert WorkflowRun.objects.get(pk=run.pk).status != RunStatus.SUSPENDED
    done = WorkflowRunFactory(completed=True)
    response = client.post(run_url(done.pk, "cancel"), {"post": "yes"}, follow=True)
    assert "is completed; a run that is completed cannot be cancelled" in (
        response.content.decode()
    )
    assert WorkflowRun.objects.get(pk=done.pk).status == RunStatus.COMPLETED
    assert client.post(run_url(run.pk, "operate", "purge")).status_code == 404
    assert client.get(run_url(run.pk, "operate", "suspend")).status_code == 405
    assert client.post(run_url("no-such-run", "operate", "suspend")).status_code == 404


def test_run_page_operations_are_csrf_protected() -> None:
    client = Client(enforce_csrf_checks=True)
    staff(client, "view_workflowrun", "operate_workflowrun", "delete_workflowrun")
    run = WorkflowRunFactory(waiting=True)
    assert client.post(run_url(run.pk, "operate", "suspend")).status_code == 403
    assert client.post(run_url(run.pk, "cancel"), {"post": "yes"}).status_code == 403
    assert client.post(run_url(run.pk, "signal"), {"name": "go"}).status_code == 403
    assert WorkflowRun.objects.get(pk=run.pk).status == RunStatus.WAITING


def test_send_signal_form_stores_the_signal(admin_client: Any) -> None:
    run = WorkflowRunFactory(id="sig/child-1", waiting=True)
    response = admin_client.post(
        run_url(run.pk, "signal"),
        {"name": "decision", "payload": '{"status": "approved"}', "signal_id": "once"},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == run_url(run.pk)
    signal = WorkflowSignal.objects.get(run=run)
    assert (signal.name, signal.payload, signal.signal_id) == (
        "decision",
        {"status": "approved"},
        "once",
    )
    # The signal id makes a repeat a no-op.
    admin_client.post(run_url(run.pk, "signal"), {"name": "decision", "signal_id": "once"})
    assert WorkflowSignal.objects.filter(run=run).count() == 1
    # An empty payload is null.
    admin_client.post(run_url(run.pk, "signal"), {"name": "ping", "payload": "  "})
    assert WorkflowSignal.objects.get(run=run, name="ping").payload is None


BAD_SIGNALS = {
    "no name": ({"name": "", "payload": "1"}, "name", "required"),
    "blank name": ({"name": "   ", "payload": "1"}, "name", "a visible character"),
    "long name": ({"name": "x" * 256, "payload": "1"}, "name", "at most 255"),
    "not json": ({"name": "go", "payload": "{nope"}, "payload", "Not valid JSON"),
    "nan": ({"name": "go", "payload": "NaN"}, "payload", "not JSON-serialisable"),
    "nul": ({"name": "go", "payload": '"a\\u0000b"'}, "payload", "NUL"),
    "too big": (
        {"name": "go", "payload": json.dumps("x" * MAX_FORM_PAYLOAD_BYTES)},
        "payload",
        "over 65536 bytes",
    ),
    "blank signal id": ({"name": "go", "signal_id": "  "}, "signal_id", "a visible character"),
}


@pytest.mark.parametrize("case", list(BAD_SIGNALS))
def test_send_signal_form_refuses_bad_input(admin_client: Any, case: str) -> None:
    data, field, message = BAD_SIGNALS[case]
    run = WorkflowRunFactory(waiting=True)
    response = admin_client.post(run_url(run.pk, "signal"), data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and message in str(errors[field]), errors
    assert not WorkflowSignal.objects.exists()


def test_send_signal_to_a_finished_run_is_refused(admin_client: Any) -> None:
    run = WorkflowRunFactory(completed=True)
    response = admin_client.post(
        run_url(run.pk, "signal"), {"name": "go", "payload": "1"}, follow=True
    )
    assert response.redirect_chain[-1][0] == run_url(run.pk)
    assert "is completed; it accepts no more input" in response.content.decode()
    assert not WorkflowSignal.objects.exists()


def test_send_signal_to_a_run_that_finishes_meanwhile_is_a_form_error(
    admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from weft_django import operations

    run = WorkflowRunFactory(waiting=True)
    real = operations.signal

    def finish_first(workflow_id: str, *args: Any, **kwargs: Any) -> None:
        WorkflowRun.objects.filter(pk=workflow_id).update(status=RunStatus.COMPLETED)
        real(workflow_id, *args, **kwargs)

    monkeypatch.setattr(operations, "signal", finish_first)
    response = admin_client.post(run_url(run.pk, "signal"), {"name": "go", "payload": "1"})
    assert response.status_code == 200
    assert "WorkflowTerminalError" in str(response.context["form"].non_field_errors())
    assert not WorkflowSignal.objects.exists()
