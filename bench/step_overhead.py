#!/usr/bin/env python
"""Per-step overhead: N 10-step no-op workflows through one in-process engine.

Each run is started with ``weft.start``, claimed with ``engine.acquire`` and
driven to completion with ``engine.drive`` (one turn: no driver, no worker,
no scans). Reported per database:

* steps/s      end to end: (runs x steps) / wall time of start + claim + drive
* turn steps/s the same, counting only the time inside ``drive``
* step p50/p99 latency of one ``ctx.step`` call (execute + fenced checkpoint)
* CPU/step     process CPU time of the whole loop / steps
* SQL/step     statements per extra step (a 20-step run minus a 10-step run, / 10)
* SQL/run      statements of one whole 10-step run (start, claim, turn, finish)

Every database is a scratch one: a temporary SQLite file, and a PostgreSQL
database (``weft_bench_steps``, dropped and re-created) on the server given by
``--pg-url``; both are migrated first. Each database is measured in its own
child process, since Django reads ``DATABASE_URL`` once at start-up.

    python bench/step_overhead.py                       # both databases, 1000 runs
    python bench/step_overhead.py --db postgres --runs 3000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# DEBUG off (as the benchmarks run) is production for the example settings, which
# then want a secret key of their own.
BENCH_SECRET_KEY = "weft-bench-not-a-deployment-key"
PG_DB = "weft_bench_steps"


# -- the child: one database ------------------------------------------------------


def _child(runs: int, steps: int, warmup: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import weft_django as weft
    from weft_django.models import EngineKind
    from weft_django.runtime.engine import TurnOutcome, WorkflowEngine

    call_command("migrate", verbosity=0)

    latencies: list[float] = []

    def noop(index: int) -> int:
        return index

    @weft.workflow(name="bench.steps")
    def bench_steps(ctx: weft.Context, count: int) -> int:
        for index in range(count):
            began = time.perf_counter()
            ctx.step(noop, index, name="noop")
            latencies.append(time.perf_counter() - began)
        return count

    engine = WorkflowEngine(kind=EngineKind.OTHER).start()

    def one(run_id: str, count: int) -> float:
        weft.start("bench.steps", count, workflow_id=run_id)
        engine.acquire(run_id)
        entered = time.perf_counter()
        outcome = engine.drive(run_id)
        if outcome != TurnOutcome.COMPLETED:
            raise SystemExit(f"run {run_id}: {outcome}")
        return time.perf_counter() - entered

    for index in range(warmup):
        one(f"warm-{index}", steps)

    with CaptureQueriesContext(connection) as ten:
        one("count-10", 10)
    with CaptureQueriesContext(connection) as twenty:
        one("count-20", 20)

    latencies.clear()
    turn_time = 0.0
    cpu_began = time.process_time()
    began = time.perf_counter()
    for index in range(runs):
        turn_time += one(f"run-{index}", steps)
    wall = time.perf_counter() - began
    cpu = time.process_time() - cpu_began
    engine.shutdown()

    total = runs * steps
    ordered = sorted(latencies)
    return {
        "vendor": connection.vendor,
        "runs": runs,
        "steps": total,
        "wall_s": wall,
        "steps_per_s": total / wall,
        "turn_steps_per_s": total / turn_time,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "cpu_ms_per_step": cpu / total * 1000,
        "sql_per_step": (len(twenty.captured_queries) - len(ten.captured_queries)) / 10,
        "sql_per_run": len(ten.captured_queries),
    }


# -- the parent: scratch databases, children, the table ------------------------------


def _pg_reset(server_url: str) -> str:
    import psycopg

    with psycopg.connect(f"{server_url.rstrip('/')}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_DB}"')
        conn.execute(f'CREATE DATABASE "{PG_DB}"')
    return f"{server_url.rstrip('/')}/{PG_DB}"


def _measure(database_url: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="example_project.settings",
        DJANGO_DEBUG="false",  # DEBUG would also keep every query in memory
        DJANGO_SECRET_KEY=BENCH_SECRET_KEY,  # which DEBUG off wants
        WEFT_LOG_LEVEL="WARNING",
    )
    command = [
        sys.executable,
        __file__,
        "--child",
        f"--runs={args.runs}",
        f"--steps={args.steps}",
        f"--warmup={args.warmup}",
    ]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"benchmark child failed on {database_url}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _table(results: list[dict[str, Any]]) -> str:
    columns = [
        ("database", "vendor", "{}"),
        ("runs", "runs", "{}"),
        ("steps", "steps", "{}"),
        ("steps/s", "steps_per_s", "{:.0f}"),
        ("turn steps/s", "turn_steps_per_s", "{:.0f}"),
        ("step p50 ms", "p50_ms", "{:.3f}"),
        ("step p99 ms", "p99_ms", "{:.3f}"),
        ("CPU ms/step", "cpu_ms_per_step", "{:.3f}"),
        ("SQL/step", "sql_per_step", "{:.1f}"),
        ("SQL/run", "sql_per_run", "{}"),
    ]
    rows = [[title for title, _key, _fmt in columns]]
    rows += [[fmt.format(result[key]) for _title, key, fmt in columns] for result in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = [" | ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)) for row in rows]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=1000, help="measured workflows per database")
    parser.add_argument("--steps", type=int, default=10, help="no-op steps per workflow")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("WEFT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432"),
        help="PostgreSQL server (without a database name)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(_child(args.runs, args.steps, args.warmup)))
        return

    results = []
    if args.db in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="weft-bench-") as scratch:
            results.append(_measure(f"sqlite:///{scratch}/bench.sqlite3", args))
    if args.db in ("postgres", "both"):
        results.append(_measure(_pg_reset(args.pg_url), args))

    print("command: " + " ".join(["python", "bench/step_overhead.py", *sys.argv[1:]]))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, one in-process engine\n")
    print(_table(results))


if __name__ == "__main__":
    main()
