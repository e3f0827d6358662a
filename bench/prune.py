#!/usr/bin/env python
"""Retention: how fast does ``weft_prune`` delete, and what does it cost a live worker?

Question: with ``--runs`` finished runs and ``--events`` events (default 1,000,000
and 10,000,000) on PostgreSQL, how many rows per second does the prune delete
(runs + events, in batches of ``--batch`` runs, each its own transaction), and
what is the worst lock wait it causes a ``manage.py weft_worker`` that drives
workflows at the same time?

Setup, in a scratch PostgreSQL database of its own (dropped at the end unless
``--keep``): the runs and events are bulk-loaded with ``INSERT ... SELECT FROM
generate_series`` (finished 40 days ago, statuses completed/failed/cancelled,
``--events / --runs`` events each), with no ANALYZE afterwards (the plan of a
prune batch right after a bulk load is printed). One real worker (concurrency
2) then drives ``it.noop_steps`` runs fed continuously by this process
(``--inflight`` at a time): ``--before`` seconds without the prune, then while
the prune runs in this process (``--older-than 20 days``, all of it, or until
``--budget`` seconds). A sampler reads ``pg_stat_activity`` every 50 ms for
sessions waiting on a lock (its ``now() - query_start``), and the worker's step
latency is the gap between consecutive events of one run (their ``created_at``).

    python bench/prune.py --runs 1000000 --events 10000000
"""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Scratch,
    Workers,
    base_parser,
    command_line,
    percentile,
    print_table,
    setup_django,
)

TIMING = {"WEFT_CLAIM_TTL": "30", "WEFT_CLAIM_RENEW_INTERVAL": "5", "WEFT_TICK_INTERVAL": "0.25"}
STEPS = 5


def load(runs: int, events: int) -> float:
    """Bulk-load the finished runs and their events; returns the seconds it took."""
    from django.db import connection

    from weft_django.models import WorkflowEvent, WorkflowRun

    per_run = max(events // runs, 1)
    run_table = WorkflowRun._meta.db_table
    event_table = WorkflowEvent._meta.db_table
    began = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {run_table} (id, workflow_name, workflow_version, status, args, kwargs,
                result, error, parent_id, created_at, updated_at, started_at, finished_at)
            SELECT 'old-' || g, 'it.noop_steps', 1,
                   (ARRAY['completed', 'failed', 'cancelled'])[1 + g %% 3],
                   '[10]'::jsonb, '{{}}'::jsonb, '10'::jsonb, NULL, '',
                   now() - interval '41 days', now() - interval '40 days',
                   now() - interval '41 days',
                   now() - interval '40 days' + g * interval '1 millisecond'
            FROM generate_series(1, %s) AS g
            """,
            [runs],
        )
        cursor.execute(
            f"""
            INSERT INTO {event_table} (run_id, seq, kind, name, result, error, engine_id,
                epoch, created_at)
            SELECT 'old-' || (1 + (g - 1) / %s), 1 + (g - 1) %% %s, 'step',
                   'noop' || ((g - 1) %% %s), to_jsonb((g - 1) %% %s), NULL, 'bench-loader', 1,
                   now() - interval '40 days'
            FROM generate_series(1, %s) AS g
            """,
            [per_run, per_run, per_run, per_run, per_run * runs],
        )
    return time.monotonic() - began


def explain_first_batch(batch: int) -> str:
    """The plans of a batch's page query and its events DELETE, as the prune runs them."""
    from django.db import connection, transaction
    from django.utils import timezone

    from weft_django.models import WorkflowEvent, WorkflowRun
    from weft_django.retention.pruner import guard_plans

    cutoff = timezone.now()
    page = (
        WorkflowRun.objects.filter(status="completed", finished_at__lt=cutoff)
        .order_by("finished_at", "id")
        .values_list("finished_at", "id")[:batch]
    )
    ids = [f"old-{n}" for n in range(3, 3 * batch, 3)]
    events = WorkflowEvent.objects.filter(run_id__in=ids).values("id")
    plans = []
    with transaction.atomic():
        guard_plans("default")
        with connection.cursor() as cursor:
            for label, query in (("page", page), ("events of a batch", events)):
                sql, params = query.query.sql_with_params()
                cursor.execute(f"EXPLAIN {sql}", params)
                lines = [
                    re.sub(r"'\{([^,]*,[^,]*),[^}]*\}'", r"'{\1,...}'", row[0])
                    for row in cursor.fetchall()
                ]
                plans.append(f"{label}: " + "\n  ".join(lines))
    return "\n".join(plans)


class Feeder(threading.Thread):
    """Keep ``inflight`` runs of it.noop_steps started until stopped."""

    def __init__(self, inflight: int) -> None:
        super().__init__(daemon=True)
        self.inflight = inflight
        self.stop = threading.Event()
        self.started_ids: list[str] = []

    def run(self) -> None:
        from django.db import connection

        import weft_django as weft
        from weft_django.models import WorkflowRun

        index = 0
        while not self.stop.is_set():
            active = WorkflowRun.objects.filter(
                pk__in=self.started_ids[-4 * self.inflight :],
                status__in=["pending", "running"],
            ).count()
            for _ in range(self.inflight - active):
                run_id = f"live-{index:06d}"
                weft.start("it.noop_steps", STEPS, workflow_id=run_id)
                self.started_ids.append(run_id)
                index += 1
            self.stop.wait(0.05)
        connection.close()


class LockSampler(threading.Thread):
    """Sample sessions waiting on a lock every 50 ms (other than this process's)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.waits: list[float] = []
        self.samples = 0

    def run(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            while not self.stop.is_set():
                cursor.execute(
                    "SELECT extract(epoch FROM now() - query_start) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
                self.waits.extend(float(row[0]) for row in cursor.fetchall())
                self.samples += 1
                self.stop.wait(0.05)
        connection.close()


def step_gaps(run_ids: list[str]) -> list[float]:
    """Seconds between consecutive events of each run (the worker's step latency)."""
    from weft_django.models import WorkflowEvent

    rows = (
        WorkflowEvent.objects.filter(run_id__in=run_ids)
        .order_by("run_id", "seq")
        .values_list("run_id", "created_at")
    )
    gaps, last = [], (None, None)
    for run_id, created in rows:
        if last[0] == run_id:
            gaps.append((created - last[1]).total_seconds())
        last = (run_id, created)
    return gaps


def measure(args: Any, url: str) -> dict[str, Any]:
    from weft_django.models import WorkflowEvent, WorkflowRun
    from weft_django.retention.pruner import Pruner

    load_s = load(args.runs, args.events)
    plan = explain_first_batch(args.batch)
    workers = Workers(url)
    feeder = Feeder(args.inflight)
    sampler = LockSampler()
    try:
        worker = workers.start("w1", concurrency=2, **TIMING)
        workers.wait_ready(worker)
        feeder.start()
        sampler.start()
        time.sleep(args.before)
        before_ids = list(feeder.started_ids)
        before_waits = len(sampler.waits)
        worst_before = max(sampler.waits, default=0.0)
        pruner = Pruner(
            older_than=20 * 86400,
            batch_size=args.batch,
            time_budget=args.budget or None,
            engines=False,
        )
        summary = pruner.run()
        during_ids = feeder.started_ids[len(before_ids) :]
        feeder.stop.set()
        feeder.join()
        sampler.stop.set()
        sampler.join()
    finally:
        workers.kill_all()
    deleted = summary.deleted
    rows = deleted["runs"] + deleted["events"] + deleted["signals"] + deleted["updates"]
    during_waits = sampler.waits[before_waits:]
    return {
        "load_s": load_s,
        "plan": plan,
        "summary": summary,
        "rows": rows,
        "before": step_gaps(before_ids),
        "during": step_gaps(during_ids),
        "worst_before": worst_before,
        "worst_during": max(during_waits, default=0.0),
        "waits_during": len(during_waits),
        "samples": sampler.samples,
        "left": WorkflowRun.objects.filter(pk__startswith="old-").count(),
        "events_left": WorkflowEvent.objects.filter(engine_id="bench-loader").count(),
    }


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=1000, help="runs per batch (default 1000)")
    parser.add_argument("--before", type=float, default=15.0, help="seconds before the prune")
    parser.add_argument("--inflight", type=int, default=4, help="live runs kept in flight")
    parser.add_argument(
        "--budget", type=float, default=0.0, help="prune time budget in seconds (0: all)"
    )
    args = parser.parse_args()
    scratch = Scratch("prune", keep=args.keep, pg_url=args.pg_url)
    try:
        url = scratch.postgres()
        scratch.migrate(url)
        setup_django(url)
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            version = cursor.fetchone()[0]
        result = measure(args, url)
    finally:
        from django.db import connections

        connections.close_all()
        scratch.drop_all()
    summary = result["summary"]
    print(f"command: {command_line()}")
    print(f"PostgreSQL {version}; bulk load {result['load_s']:.1f}s (no ANALYZE)")
    print("plan of a batch's page query right after the load:")
    print("    " + result["plan"].replace("\n", "\n    "))
    print_table(
        ["runs deleted", "events deleted", "batches", "seconds", "rows/s", "runs/s", "left"],
        [
            [
                summary.deleted["runs"],
                summary.deleted["events"],
                summary.batches,
                summary.seconds,
                result["rows"] / summary.seconds,
                summary.deleted["runs"] / summary.seconds,
                f"{result['left']} runs, {result['events_left']} events",
            ]
        ],
    )
    print()
    table = []
    for phase in ("before", "during"):
        gaps = result[phase]
        table.append(
            [
                f"{phase} the prune",
                len(gaps),
                percentile(gaps, 0.5) * 1000,
                percentile(gaps, 0.99) * 1000,
                max(gaps, default=float("nan")) * 1000,
                result[f"worst_{phase}"] * 1000,
            ]
        )
    print_table(
        [
            "worker",
            "step gaps",
            "p50 ms",
            "p99 ms",
            "max ms",
            "worst lock wait sampled ms",
        ],
        table,
    )
    print(
        f"lock-wait samples: {result['samples']} (every 50 ms), sessions seen waiting "
        f"during the prune: {result['waits_during']}"
    )


if __name__ == "__main__":
    main()
