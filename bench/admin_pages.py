"""Admin pages at scale: 1,000,000 runs and 10,000,000 events on PostgreSQL.

    python bench/admin_pages.py [--runs 1000000] [--events-per-run 10] [--big-run 20000]
                                [--repeat 3] [--keep] [--reuse]

Builds the data in the scratch database ``bench_h12`` (``--dbname``) with
``INSERT ... SELECT generate_series`` (no ORM, no ANALYZE afterwards: the
planner sees the tables as they are right after a bulk load), then renders
each admin page with Django's test client logged in as a superuser and prints
the median time of ``--repeat`` renders and the number of queries. Target
(docs/benchmarks.md): every page under 500 ms; the overview charts' statements
are explained (EXPLAIN) and must use their indexes. The database is dropped at the
end unless ``--keep``; ``--reuse`` skips the build when the database exists.

Data: runs ``run-0000001``... over 30 days, 90 % completed, 2 % failed,
1 % cancelled, 5 % waiting, 1 % pending, 0.5 % running, 0.5 % suspended;
10 events per run plus one run (``run-big``) with 20,000 events; a claim row
per run (active runs held by 2 live engines and 1 expired one: stuck
claims); a signal per other run (2,000 unconsumed, an hour old); an update
request per tenth run (1,000 pending); 20 engines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, command_line, print_table

ENGINES = """
INSERT INTO weft_django_engine (id, hostname, pid, kind, ownership_mode, status, started_at,
    heartbeat_at, lease_expires_at, stopped_at, revocations, passes)
SELECT 'engine-' || g, 'host-' || (g % 4) || '.example', 1000 + g,
    CASE WHEN g % 5 = 0 THEN 'celery' ELSE 'worker' END, 'workflow-lease',
    CASE WHEN g <= 3 THEN 'running' ELSE 'stopped' END,
    now() - interval '1 hour' * g, now(),
    CASE WHEN g <= 2 THEN now() + interval '30 seconds' ELSE now() - interval '1 hour' END,
    CASE WHEN g <= 3 THEN NULL ELSE now() - interval '10 minutes' * g END, 0,
    '{"renew": {"counts": {"renewed": 1}, "seconds": 0.001, "succeeded": true},
      "reclaim": {"counts": {"claimed": 3, "busy": 1}, "seconds": 0.01, "succeeded": true}}'
FROM generate_series(1, 20) g
"""

RUNS = """
INSERT INTO weft_django_workflowrun (id, workflow_name, workflow_version, status, args, kwargs,
    result, error, parent_id, created_at, updated_at, start_at, started_at, finished_at,
    timeout_at, wake_at, waiting_on, wake_hint_at)
SELECT 'run-' || lpad(g::text, 7, '0'),
    (ARRAY['orders.fulfil_order', 'orders.approve_order', 'orders.cart', 'orders.approver',
           'shop.refund'])[1 + g % 5],
    1, s.status, '[]', '{}',
    CASE WHEN s.status = 'completed' THEN '{"ok": true}'::jsonb END,
    CASE WHEN s.status = 'failed' THEN '{"type": "ValueError", "message": "boom"}'::jsonb END,
    '', c.at, c.at + interval '5 seconds', NULL, c.at,
    CASE WHEN s.status IN ('completed', 'failed', 'cancelled') THEN c.at + interval '5 seconds' END,
    NULL, NULL,
    CASE WHEN s.status = 'waiting' THEN '{"kind": "signal", "name": "decision"}'::jsonb END, NULL
FROM generate_series(1, %(runs)s) g
CROSS JOIN LATERAL (SELECT now() - interval '30 days' * (1 - g::float / %(runs)s) AS at) c
CROSS JOIN LATERAL (SELECT CASE
    WHEN g % 200 = 7 THEN 'suspended' WHEN g % 200 = 8 THEN 'running'
    WHEN g % 100 = 1 THEN 'pending' WHEN g % 100 IN (2, 3) THEN 'failed'
    WHEN g % 100 = 4 THEN 'cancelled' WHEN g % 100 BETWEEN 10 AND 14 THEN 'waiting'
    ELSE 'completed' END AS status) s
"""

BIG_RUN = """
INSERT INTO weft_django_workflowrun (id, workflow_name, workflow_version, status, args, kwargs,
    parent_id, created_at, updated_at, waiting_on)
VALUES ('run-big', 'orders.cart', 1, 'waiting', '[]', '{}', '', now(), now(),
    '{"kind": "update", "name": "add_item"}')
"""

EVENTS = """
INSERT INTO weft_django_workflowevent (run_id, seq, kind, name, result, error, engine_id, epoch,
    created_at)
SELECT r.id, e,
    CASE WHEN e %% 3 = 0 THEN 'wait' ELSE 'step' END,
    CASE WHEN e %% 3 = 0 THEN 'signal:decision' ELSE 'step-' || e END,
    CASE WHEN e %% 3 = 0 THEN '{"deadline": null}'::jsonb ELSE '{"n": 1}'::jsonb END,
    NULL, CASE WHEN e > %(per_run)s / 2 THEN 'engine-2' ELSE 'engine-1' END,
    CASE WHEN e > %(per_run)s / 2 THEN 2 ELSE 1 END, r.created_at + interval '1 second' * e
FROM weft_django_workflowrun r CROSS JOIN generate_series(1, %(per_run)s) e
WHERE r.id <> 'run-big'
"""

BIG_EVENTS = """
INSERT INTO weft_django_workflowevent (run_id, seq, kind, name, result, error, engine_id, epoch,
    created_at)
SELECT 'run-big', e, CASE WHEN e %% 2 = 0 THEN 'update' ELSE 'step' END, 'add_item',
    '{"item": "x"}'::jsonb, NULL, 'engine-' || (1 + (e / 5000)), 1 + (e / 5000),
    now() - interval '1 second' * (%(big)s - e)
FROM generate_series(1, %(big)s) e
"""

CLAIMS = """
INSERT INTO weft_django_claim (workflow_id, epoch, holder_id, claimed_at)
SELECT id, 1,
    CASE WHEN status IN ('pending', 'running', 'waiting')
         THEN 'engine-' || (1 + (hashtext(id) & 3) %% 3) END,
    CASE WHEN status IN ('pending', 'running', 'waiting') THEN updated_at END
FROM weft_django_workflowrun
"""

SIGNALS = """
INSERT INTO weft_django_workflowsignal (run_id, signal_id, name, payload, created_at,
    consumed_at, consumed_seq)
SELECT id, 'sig-' || id, 'decision', '{"status": "approved"}', created_at,
    CASE WHEN rn %% 250 = 0 THEN NULL ELSE created_at + interval '1 second' END,
    CASE WHEN rn %% 250 = 0 THEN NULL ELSE 3 END
FROM (SELECT id, created_at, row_number() OVER (ORDER BY id) rn
      FROM weft_django_workflowrun WHERE id LIKE 'run-___0%%' OR id LIKE 'run-___5%%') r
"""

UPDATES = """
INSERT INTO weft_django_updaterequest (run_id, update_id, name, payload, status, response,
    error, applied_seq, created_at, responded_at, expires_at)
SELECT id, 'upd-' || id, 'add_item', '{"item": "x"}',
    CASE WHEN rn %% 100 = 0 THEN 'pending' ELSE 'applied' END, NULL, NULL, NULL,
    created_at, NULL, NULL
FROM (SELECT id, created_at, row_number() OVER (ORDER BY id) rn
      FROM weft_django_workflowrun WHERE id LIKE 'run-%%0') r
"""


def admin_url(dbname: str) -> str:
    base = os.environ.get("WEFT_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    return base.rsplit("/", 1)[0] + "/" + dbname


def build(args: argparse.Namespace) -> None:
    import psycopg

    url = admin_url(args.dbname)
    with psycopg.connect(admin_url("postgres"), autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [args.dbname]
        ).fetchone()
        if exists and args.reuse:
            print(f"reusing {args.dbname}")
            return
        conn.execute(f'DROP DATABASE IF EXISTS "{args.dbname}"')
        conn.execute(f'CREATE DATABASE "{args.dbname}"')
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    per_run = args.events_per_run
    steps = [
        ("engines", ENGINES, {}),
        ("runs", RUNS.replace("%(runs)s", str(args.runs)), {}),
        ("big run", BIG_RUN, {}),
        ("events", EVENTS, {"per_run": per_run}),
        ("big run events", BIG_EVENTS, {"big": args.big_run}),
        ("claims", CLAIMS, {}),
        ("signals", SIGNALS, {}),
        ("updates", UPDATES, {}),
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        for name, sql, params in steps:
            began = time.perf_counter()
            formatted = "%%" in sql or "%(" in sql
            count = conn.execute(sql, params if formatted else None).rowcount
            print(f"  {name}: {count:,} rows in {time.perf_counter() - began:.1f} s", flush=True)


def pages(runs: int) -> list[tuple[str, str]]:
    from django.contrib.admin.utils import quote
    from django.urls import reverse

    def cl(model: str, query: str = "") -> str:
        return reverse(f"admin:weft_django_{model}_changelist") + query

    def change(model: str, pk: str, query: str = "") -> str:
        return reverse(f"admin:weft_django_{model}_change", args=[quote(pk)]) + query

    mid = f"run-{runs // 2:07d}"
    mid_claim = f"run-{runs // 2 + 10:07d}"
    return [
        ("overview", reverse("admin:weft_django_overview_changelist")),
        ("admin index", reverse("admin:index")),
        ("runs", cl("workflowrun")),
        ("runs ?status=failed", cl("workflowrun", "?status__exact=failed")),
        ("runs ?status=suspended", cl("workflowrun", "?status__exact=suspended")),
        (
            "runs ?workflow+status",
            cl("workflowrun", "?status__exact=completed&workflow_name=shop.refund"),
        ),
        ("runs ?owner_lease=expired", cl("workflowrun", "?owner_lease=expired")),
        ("runs ?q=<id>", cl("workflowrun", f"?q={mid}")),
        ("runs sorted by id", cl("workflowrun", "?o=1")),
        ("runs page 50", cl("workflowrun", "?p=50")),
        ("events", cl("workflowevent")),
        ("events ?kind=wait", cl("workflowevent", "?kind=wait")),
        ("events ?q=<run id>", cl("workflowevent", f"?q={mid}")),
        ("signals ?pending", cl("workflowsignal", "?consumed_at__isempty=1")),
        ("updates ?status=pending", cl("updaterequest", "?status__exact=pending")),
        ("claims", cl("claim")),
        ("claims ?lease_state=expired", cl("claim", "?lease_state=expired")),
        ("claims ?q=<id>", cl("claim", f"?q={mid_claim}")),
        ("engines", cl("engine")),
        ("engine page (live, 1/3 of active claims)", change("engine", "engine-1")),
        ("engine page, last claims page", change("engine", "engine-1", "?claims_page=99999")),
        ("run page (20,000 events)", change("workflowrun", "run-big")),
        ("run page, last timeline page", change("workflowrun", "run-big", "?events_page=99999")),
        ("run page (10 events)", change("workflowrun", mid)),
        ("run page, a takeover in view", change("workflowrun", "run-big", "?events_page=50")),
    ]


def explain_charts() -> list[tuple[str, str]]:
    """The overview charts' statements explained on the big tables: the index
    each one uses (a sequential scan stops the benchmark)."""
    import json

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from weft_django.admin import activity
    from weft_django.ownership import db_now

    now = db_now()
    since, until = activity.window(now)
    with CaptureQueriesContext(connection) as bounds:
        newest, low, _ = activity.step_bounds("default")
    statements = [("steps' bounds", bounds.captured_queries[0]["sql"], None)]
    for name, queryset, field, extra in (
        ("runs started", activity.started_query(since, until, "default"), "created_at", ()),
        (
            "runs finished",
            activity.finished_query(since, until, "default"),
            "finished_at",
            ("status",),
        ),
        (
            "steps",
            activity.steps_query(since, until, low or 0, newest or 0, "default"),
            "created_at",
            (),
        ),
    ):
        sql, params = activity.counted_per_minute(queryset, field, *extra).query.sql_with_params()
        statements.append((name, sql, params))
    found = []
    for name, sql, params in statements:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            (raw,) = cursor.fetchone()
        plan = raw if isinstance(raw, list) else json.loads(raw)
        nodes, todo = [], [plan[0]["Plan"]]
        while todo:
            node = todo.pop()
            nodes.append(node)
            todo.extend(node.get("Plans", []))
        if any(node["Node Type"] == "Seq Scan" for node in nodes):
            raise SystemExit(f"{name}: a sequential scan: {json.dumps(plan, indent=1)}")
        scans = sorted(
            {f"{node['Node Type']} {node['Index Name']}" for node in nodes if "Index Name" in node}
        )
        found.append((name, ", ".join(scans)))
    return found


def measure(args: argparse.Namespace) -> list[tuple[str, float, int, int]]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    setup_test_environment()
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_staff": True})
    user.is_superuser = user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    rows = []
    for name, url in pages(args.runs):
        times = []
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as ctx:
                began = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - began) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{name}: HTTP {response.status_code} for {url}")
        rows.append(
            (name, statistics.median(times), len(ctx.captured_queries), len(response.content))
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--events-per-run", type=int, default=10)
    parser.add_argument("--big-run", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dbname", default="bench_h12")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = admin_url(args.dbname)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    os.environ["DJANGO_DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SECRET_KEY", "weft-bench-not-a-deployment-key")
    os.environ["DJANGO_SECURE_SSL_REDIRECT"] = "false"  # the test client speaks plain HTTP
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    began = time.perf_counter()
    build(args)
    print(f"built in {time.perf_counter() - began:.0f} s (no ANALYZE)", flush=True)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        version = cursor.fetchone()[0].split(",")[0]
        cursor.execute("SELECT count(*) FROM weft_django_workflowevent")
        events = cursor.fetchone()[0]
    rows = measure(args)
    print()
    print(f"{version}; {args.runs + 1:,} runs, {events:,} events; median of {args.repeat} renders")
    print_table(
        ["page", "ms", "queries", "KiB"], [(n, ms, q, size // 1024) for n, ms, q, size in rows]
    )
    print("\nthe overview charts' plans (EXPLAIN):")
    print_table(["statement", "scans"], explain_charts())
    worst = max(ms for _, ms, _, _ in rows)
    print(f"\nslowest page: {worst:.0f} ms (target < 500 ms)")
    print(f"command: {command_line()}")
    if not args.keep:
        connection.close()
        import psycopg

        with psycopg.connect(admin_url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.dbname}" WITH (FORCE)')
        print(f"dropped {args.dbname}")


if __name__ == "__main__":
    main()
