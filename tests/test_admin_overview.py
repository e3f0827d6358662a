"""The overview an operator can trust: live engines first (never crowded out by the
Celery passes' engines), dead engines as dead, the Celery pass summaries, stuck
runs, JSON for errors and payloads, and a query count that does not grow."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.factories import (
    EngineFactory,
    GlobalLeaseFactory,
    UpdateRequestFactory,
    WorkflowRunFactory,
    WorkflowSignalFactory,
)
from weft_django.admin import overview as overview_module
from weft_django.admin.overview import ago, as_json
from weft_django.models import (
    Claim,
    EngineKind,
    GlobalLease,
    PassKind,
    RunStatus,
    WorkflowRun,
)
from weft_django.runtime.passes.summaries import record_pass

from .plans import load_held_parked, plan_nodes

pytestmark = pytest.mark.django_db

OVERVIEW = "/admin/weft_django/overview/"
TTL = 30.0  # CLAIM_TTL of the test settings


def old(**delta: float) -> Any:
    return timezone.now() - timedelta(**delta)


def page(client: Any) -> tuple[Any, str]:
    response = client.get(OVERVIEW)
    assert response.status_code == 200
    return response.context, response.content.decode()


def celery_engines(count: int, prefix: str = "celery") -> None:
    for n in range(count):
        EngineFactory(
            id=f"{prefix}-{n:03d}",
            kind=EngineKind.CELERY,
            stopped=True,
            stopped_at=old(seconds=15 * n + 1),
            started_at=old(seconds=15 * n + 2),
        )


# -- engines ----------------------------------------------------------------------


def test_live_engines_come_first_even_after_100_celery_passes(admin_client: Any) -> None:
    EngineFactory(id="worker-a", started_at=old(hours=5))
    EngineFactory(id="worker-b", started_at=old(hours=4))
    EngineFactory(id="worker-dead", lease_expires_at=old(minutes=4), started_at=old(hours=3))
    EngineFactory(id="worker-stopped", stopped=True, stopped_at=old(hours=2))
    celery_engines(100)  # 25 minutes of a 30 s beat with two passes, all newer
    EngineFactory(id="celery-live", kind=EngineKind.CELERY)  # a pass under way
    EngineFactory(id="celery-dead", kind=EngineKind.CELERY, lease_expires_at=old(minutes=5))

    context, content = page(admin_client)
    rows = [(row["engine"].pk, row["state"]) for row in context["engines"]]
    assert rows == [
        ("worker-a", "live"),
        ("worker-b", "live"),
        ("worker-dead", "dead"),
        ("worker-stopped", "stopped"),
    ]
    assert "celery-0" not in content and "celery-live" not in content
    assert (
        content.index("worker-a") < content.index("worker-dead") < content.index("worker-stopped")
    )
    counts = {group: str(n) for group, n in context["engine_counts"].items()}
    assert counts == {"live": "2", "dead": "1", "stopped": "1"}


def test_a_dead_engine_says_how_long_ago_its_lease_expired(admin_client: Any) -> None:
    EngineFactory(id="worker-dead", lease_expires_at=old(seconds=270))
    EngineFactory(id="worker-live")
    context, content = page(admin_client)
    dead = next(row for row in context["engines"] if row["engine"].pk == "worker-dead")
    assert dead["state"] == "dead" and dead["lease_left"] is None and dead["ended_ago"] == "4 min"
    assert "dead, lease expired 4 min ago" in content
    assert "-270" not in content and "running/expired" not in content
    live = next(row for row in context["engines"] if row["engine"].pk == "worker-live")
    assert live["lease_left"] > 0 and "s left" in content


def test_beyond_the_limit_the_engines_section_says_how_many_more(
    admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overview_module, "LIVE_ENGINE_LIMIT", 3)
    for n in range(5):
        EngineFactory(id=f"worker-{n}")
    context, content = page(admin_client)
    assert len(context["engines"]) == 3
    assert context["engines_more"] == {"live": 2, "dead": 0, "stopped": 0}
    assert "and 2 more live" in content


def test_ago_reads_like_a_person() -> None:
    assert [ago(s) for s in (0, 12.7, 60, 270, 7200, 3 * 86400, -5)] == [
        "0 s",
        "12 s",
        "1 min",
        "4 min",
        "2 h",
        "3 d",
        "0 s",
    ]


# -- Celery passes ----------------------------------------------------------------


def test_the_celery_passes_section_shows_each_kinds_last_pass(admin_client: Any) -> None:
    now = timezone.now()
    record_pass(
        PassKind.SIGNAL_POLL,
        started_at=now - timedelta(seconds=12.5),
        finished_at=now - timedelta(seconds=12),
        counts={"drained": 3, "owner_notified": 1},
    )
    record_pass(
        PassKind.PRUNE,
        started_at=now - timedelta(minutes=5),
        finished_at=now - timedelta(minutes=5),
        counts={},
        error=ValueError("prune broke"),
    )
    context, content = page(admin_client)
    kinds = {p["kind"]: p for p in context["passes"]}
    assert set(kinds) == {"signal_poll", "update_poll", "prune"}
    assert kinds["update_poll"]["row"] is None and "No pass recorded." in content
    assert "last signal poll 12 s ago" in content
    assert "drained: 3" in content and "owner_notified: 1" in content
    assert "ValueError: prune broke" in content


def test_a_pass_summary_row_is_upserted_not_added(admin_client: Any) -> None:
    now = timezone.now()
    for n in range(5):
        record_pass(PassKind.UPDATE_POLL, started_at=now, finished_at=now, counts={"drained": n})
    context, content = page(admin_client)
    (update,) = [p for p in context["passes"] if p["kind"] == "update_poll"]
    assert update["row"].passes == 5 and update["counts"] == [("drained", 4)]
    assert content.count('class="weft-pass-summary weft-pass-summary-update_poll"') == 1


# -- stuck runs -------------------------------------------------------------------


def stuck_ids(client: Any) -> list[str]:
    context, _ = page(client)
    return [run.run_id for run in context["stuck_runs"].runs]


def test_stuck_runs_are_due_or_messaged_and_unowned_for_longer_than_the_ttl(
    admin_client: Any,
) -> None:
    dead = EngineFactory(lease_expires_at=old(minutes=10))
    just_died = EngineFactory(lease_expires_at=old(seconds=5))
    live = EngineFactory()
    long_ago = old(minutes=5)
    # Stuck: queued and nobody took it; a due timer, its holder dead for long;
    # a wake hint on a released claim; a buffered signal; a pending update.
    WorkflowRunFactory(id="queued", created_at=long_ago)
    WorkflowRunFactory(id="timer", running=True, wake_at=long_ago, claim=dead)
    hinted = WorkflowRunFactory(id="hinted", waiting=True, wake_hint_at=long_ago, claim=True)
    Claim.objects.filter(workflow_id=hinted.pk).update(released_at=long_ago)
    WorkflowSignalFactory(run__id="signalled", name="decision", created_at=long_ago)
    UpdateRequestFactory(run__id="updated", run__running=True, created_at=long_ago)
    # Not stuck: held by a live engine; its owner died within the TTL; released
    # within the TTL; due only just now; finished; a signal nobody waits for.
    WorkflowRunFactory(id="held", running=True, wake_at=long_ago, claim=live)
    WorkflowRunFactory(id="held-queued", created_at=long_ago, claim=live)
    WorkflowRunFactory(id="just-died", running=True, wake_at=long_ago, claim=just_died)
    fresh = WorkflowRunFactory(id="released-now", waiting=True, wake_hint_at=long_ago, claim=True)
    Claim.objects.filter(workflow_id=fresh.pk).update(released_at=timezone.now())
    WorkflowRunFactory(id="fresh-queue", created_at=old(seconds=2))
    WorkflowRunFactory(id="scheduled", created_at=long_ago, start_at=timezone.now())
    WorkflowRunFactory(id="done", completed=True, wake_hint_at=long_ago)
    WorkflowSignalFactory(run__id="other-signal", name="unawaited", created_at=long_ago)
    WorkflowSignalFactory(run__id="consumed", consumed=True, created_at=long_ago)

    if not connection.features.supports_partial_indexes:
        # MariaDB/MySQL read no signal or update leg: a signal or update sent
        # through the API leaves a wake hint, which the hint leg reads.
        WorkflowRun.objects.filter(pk__in=["signalled", "updated"]).update(wake_hint_at=long_ago)
    found = stuck_ids(admin_client)
    assert sorted(found) == ["hinted", "queued", "signalled", "timer", "updated"]
    context, content = page(admin_client)
    runs = {run.run_id: run for run in context["stuck_runs"].runs}
    assert runs["timer"].reasons == ["timer due"] and runs["timer"].holder_id == dead.id
    assert runs["queued"].reasons == ["queued"] and runs["hinted"].reasons == ["wake hint"]
    if connection.features.supports_partial_indexes:
        assert runs["signalled"].reasons == ["signal"] and runs["updated"].reasons == ["update"]
    assert context["stuck_runs"].count == "5"
    assert 'id="weft-stuck-runs"' in content and "/weft_django/workflowrun/timer/" in content


def test_a_stuck_run_leaves_the_list_once_a_live_engine_holds_it(admin_client: Any) -> None:
    dead = EngineFactory(lease_expires_at=old(minutes=10))
    WorkflowRunFactory(id="stuck", waiting=True, wake_hint_at=old(minutes=3), claim=dead)
    assert stuck_ids(admin_client) == ["stuck"]
    Claim.objects.filter(workflow_id="stuck").update(holder=EngineFactory(), claimed_at=old())
    assert stuck_ids(admin_client) == []


def test_the_stuck_list_is_bounded(admin_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overview_module, "SECTION_LIMIT", 3)
    for n in range(5):
        WorkflowRunFactory(id=f"q{n}", created_at=old(minutes=10 - n))
    context, _ = page(admin_client)
    assert [run.run_id for run in context["stuck_runs"].runs] == ["q0", "q1", "q2"]
    assert context["stuck_runs"].count == "3+"


# -- JSON -------------------------------------------------------------------------


def test_errors_and_payloads_are_json_not_python_repr(admin_client: Any) -> None:
    error = {"type": "ValueError", "message": "it's bad", "retryable": False, "n": None}
    WorkflowRunFactory(id="broken", failed=True, error=error, finished_at=old(minutes=5))
    WorkflowSignalFactory(
        run__id="sig", payload={"ok": True, "who": "ops"}, created_at=old(hours=1)
    )
    UpdateRequestFactory(run__id="upd", payload=[1, {"a": None}], created_at=old(hours=1))
    _, content = page(admin_client)
    shown = as_json(error)
    assert json.loads(shown) == error and "\n  " in shown  # indented
    assert "&quot;retryable&quot;: false" in content and "&quot;n&quot;: null" in content
    assert "&quot;ok&quot;: true" in content and "&quot;a&quot;: null" in content
    for repr_ in ("&#x27;type&#x27;:", "False", "None}", "True,"):
        assert repr_ not in content, repr_


# -- cost -------------------------------------------------------------------------


def populate(n: int) -> None:
    for i in range(n):
        live = EngineFactory()
        dead = EngineFactory(lease_expires_at=old(minutes=10))
        EngineFactory(stopped=True, stopped_at=old(hours=2))
        celery_engines(3, prefix=f"c{i}-{n}")
        WorkflowRunFactory(waiting=True, claim=live)
        WorkflowRunFactory(running=True, wake_at=old(minutes=5), claim=dead)
        WorkflowRunFactory(created_at=old(minutes=5))
        WorkflowRunFactory(status=RunStatus.WAITING, wake_hint_at=old(minutes=5), claim=True)
        WorkflowSignalFactory(created_at=old(minutes=10))
        UpdateRequestFactory(run__running=True, created_at=old(minutes=10))
        WorkflowRunFactory(failed=True, error={"message": f"e{i}"}, finished_at=old(hours=1))
        now = timezone.now()
        record_pass(PassKind.SIGNAL_POLL, started_at=now, finished_at=now, counts={"x": i})


def test_the_query_count_does_not_grow_with_engines_and_runs(admin_client: Any) -> None:
    def statements() -> int:
        with CaptureQueriesContext(connection) as queries:
            page(admin_client)
        return len(queries.captured_queries)

    populate(1)
    few = statements()
    populate(15)
    context, _ = page(admin_client)
    assert len(context["engines"]) == 16 * 3 and len(context["stuck_runs"].runs) == 20
    assert statements() == few


# -- plans ------------------------------------------------------------------------

FINISHED = 30_000
PARKED = 10_000


def _load_finished(count: int) -> None:
    """``count`` completed runs, finished an hour ago, each with a claim row (no ANALYZE)."""
    run = connection.ops.quote_name(WorkflowRun._meta.db_table)
    claim = connection.ops.quote_name(Claim._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {run} (id, workflow_name, workflow_version, status, args, kwargs, "
            "parent_id, created_at, updated_at, finished_at) "
            "SELECT 'f-' || n, 't.wf', 1, 'completed', '[]', '{}', '', "
            "now() - interval '2 hours', now(), now() - interval '1 hour' "
            "FROM generate_series(0, %s) n",
            [count - 1],
        )
        cursor.execute(
            f"INSERT INTO {claim} (workflow_id, epoch) SELECT 'f-' || n, 1 "
            "FROM generate_series(0, %s) n",
            [count - 1],
        )


@pytest.mark.postgres
def test_postgresql_reads_the_stuck_runs_off_their_indexes_never_the_finished_runs(
    db: None,
) -> None:
    from weft_django.admin.stuck import stuck_runs
    from weft_django.ownership.clock import db_now

    live = EngineFactory()
    _load_finished(FINISHED)
    load_held_parked(live.id, PARKED)
    dead = EngineFactory(lease_expires_at=old(minutes=10))
    WorkflowRunFactory(id="stuck-timer", running=True, wake_at=old(minutes=5), claim=dead)
    WorkflowSignalFactory(run__id="stuck-signal", created_at=old(minutes=5))
    UpdateRequestFactory(run__id="stuck-update", run__running=True, created_at=old(minutes=5))
    WorkflowRunFactory(id="stuck-queued", created_at=old(minutes=5))
    now = db_now()
    with CaptureQueriesContext(connection) as queries:
        found = stuck_runs(now, TTL, limit=20, using="default")
    assert sorted(run.run_id for run in found.runs) == [
        "stuck-queued",
        "stuck-signal",
        "stuck-timer",
        "stuck-update",
    ]
    (query,) = queries.captured_queries
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {query['sql']}")
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    nodes = plan_nodes(plan[0]["Plan"])
    table = WorkflowRun._meta.db_table
    on_runs = [n for n in nodes if n.get("Relation Name") == table]
    assert on_runs and all("Index" in n["Node Type"] for n in on_runs), on_runs
    used = {n["Index Name"] for n in on_runs}
    # The ready queue, the two wake indexes, and for the signal and update legs
    # the run by its key (the primary key, or the partial index of started
    # runs): never an index that holds the finished runs.
    assert {"weft_run_ready_idx", "weft_run_wake_at_idx", "weft_run_wake_hint_idx"} <= used
    assert used <= {
        "weft_run_ready_idx",
        "weft_run_wake_at_idx",
        "weft_run_wake_hint_idx",
        "weft_run_started_id_idx",
        f"{table}_pkey",
    }, used
    ready = [n for n in on_runs if n["Index Name"] == "weft_run_ready_idx"]
    assert len(ready) == 2 and all(n["Node Type"] == "Index Scan" for n in ready), ready
    assert not [n for n in nodes if n["Node Type"] in ("Seq Scan", "Sort", "Bitmap Heap Scan")]

    # The sample of active runs for the unserved versions (admin/versions.py), on
    # a table with statistics: the legs over the 10,000 waiting runs each walk
    # (status, created_at, id) in order and stop at their LIMIT (the legs over a
    # handful of runs may read them any way); nothing scans the table.
    from weft_django.admin.versions import sample_statement

    sql, params = sample_statement(connection, 500)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(table)}")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    legs = plan[0]["Plan"]["Plans"]
    assert len(legs) == 6, legs
    for leg in legs[4:]:  # status = 'waiting', both directions
        scans = [n for n in plan_nodes(leg) if n.get("Relation Name") == table]
        assert [(n["Node Type"], n.get("Index Name")) for n in scans] == [
            ("Index Scan", "weft_run_status_created_idx")
        ], scans
        assert "Sort" not in {n["Node Type"] for n in plan_nodes(leg)}, leg
    assert "Seq Scan" not in {n["Node Type"] for n in plan_nodes(plan[0]["Plan"])}


def test_pass_summaries_are_read_only_in_the_admin(admin_client: Any) -> None:
    now = timezone.now()
    record_pass(
        PassKind.SIGNAL_POLL,
        started_at=now,
        finished_at=now,
        counts={"drained": 2},
        failures=[{"run_id": "r1", "error_type": "DrainError", "message": "no"}],
    )
    listing = admin_client.get("/admin/weft_django/passsummary/")
    assert listing.status_code == 200
    change_url = reverse("admin:weft_django_passsummary_change", args=[quote("signal_poll")])
    assert change_url in listing.content.decode()
    change = admin_client.get(change_url)
    content = change.content.decode()
    assert change.status_code == 200 and "&quot;drained&quot;: 2" in content
    assert "&quot;error_type&quot;: &quot;DrainError&quot;" in content
    assert admin_client.get("/admin/weft_django/passsummary/add/").status_code == 403


def test_in_mode_lease_the_live_lease_holder_owns_every_run(
    admin_client: Any, weft_settings: Any
) -> None:
    weft_settings(OWNERSHIP="lease")
    WorkflowRunFactory(id="queued", created_at=old(minutes=5))  # no claim rows in mode lease
    lease = GlobalLeaseFactory()
    assert stuck_ids(admin_client) == []
    GlobalLease.objects.filter(pk=lease.pk).update(expires_at=old(minutes=10))
    assert stuck_ids(admin_client) == ["queued"]
