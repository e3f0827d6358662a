"""``manage.py weft`` at scale: its reads on 1,000,000 runs on PostgreSQL.

    python bench/console_pages.py [--runs 1000000] [--events-per-run 1] [--big-run 20000]
                                  [--repeat 5] [--analyze] [--keep] [--reuse]
                                  [--dbname bench_h31]

Builds the data of ``bench/admin_pages.py`` (its ``build``: runs over 30
days in every status, a claim per run, 20 engines, one run with
``--big-run`` events) in a scratch database, then runs each read subcommand
through ``call_command`` with ``--json`` and prints the median time of
``--repeat`` runs and the number of statements. What it shows: a ``runs``
page deep in the table (the cursor of the run in the middle) costs what the
first page does (keyset paging on the run indexes), with and without a filter.
``--analyze`` runs ``ANALYZE`` after the build (the planner then has the
statistics autovacuum gives a live database; without it, right after a bulk
load, PostgreSQL may pick a bitmap scan and a sort for a filtered page). The
database is dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, command_line, print_table
from admin_pages import admin_url, build


def cursor_at(run_id: str) -> str:
    from weft_django.console.listing import encode_cursor
    from weft_django.models import WorkflowRun

    created_at = WorkflowRun.objects.values_list("created_at", flat=True).get(pk=run_id)
    return encode_cursor(created_at, run_id)


def commands(runs: int) -> list[tuple[str, list[str]]]:
    deep = cursor_at(f"run-{runs // 2:07d}")
    return [
        ("runs (first page)", ["runs"]),
        ("runs (a page in the middle)", ["runs", "--cursor", deep]),
        ("runs --status failed", ["runs", "--status", "failed"]),
        ("runs --status failed (middle)", ["runs", "--status", "failed", "--cursor", deep]),
        ("runs --workflow (middle)", ["runs", "--workflow", "orders.cart", "--cursor", deep]),
        ("runs --owner engine-1", ["runs", "--owner", "engine-1"]),
        ("runs --older-than 15d", ["runs", "--older-than", "15d"]),
        ("runs --limit 1000", ["runs", "--limit", "1000"]),
        ("describe (big run)", ["describe", "run-big"]),
        ("history (big run, last page)", ["history", "run-big", "--after", "19900"]),
        ("engines", ["engines"]),
        ("stuck", ["stuck"]),
    ]


def measure(args: argparse.Namespace) -> list[tuple[str, float, int, int]]:
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    rows = []
    for name, argv in commands(args.runs):
        times = []
        for _ in range(args.repeat):
            out = io.StringIO()
            with CaptureQueriesContext(connection) as ctx:
                began = time.perf_counter()
                call_command("weft", *argv, "--json", stdout=out)
                times.append((time.perf_counter() - began) * 1000)
        found = json.loads(out.getvalue())
        listed = found.get("rows", found) if isinstance(found, dict) else found
        count = len(listed) if isinstance(listed, list) else 1
        rows.append((name, statistics.median(times), len(ctx.captured_queries), count))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--events-per-run", type=int, default=1)
    parser.add_argument("--big-run", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dbname", default="bench_h31")
    parser.add_argument("--analyze", action="store_true")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = admin_url(args.dbname)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    began = time.perf_counter()
    build(args)
    from django.db import connection

    if args.analyze:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    analyzed = "ANALYZE" if args.analyze else "no ANALYZE"
    print(f"built in {time.perf_counter() - began:.0f} s ({analyzed})", flush=True)

    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        version = cursor.fetchone()[0].split(",")[0]
    rows = measure(args)
    print()
    print(
        f"{version}; {args.runs + 1:,} runs ({analyzed}); "
        f"median of {args.repeat} runs of each command"
    )
    print_table(["manage.py weft ... --json", "ms", "statements", "rows"], rows)
    print(f"command: {command_line()}")
    if not args.keep:
        connection.close()
        import psycopg

        with psycopg.connect(admin_url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.dbname}" WITH (FORCE)')
        print(f"dropped {args.dbname}")


if __name__ == "__main__":
    main()
