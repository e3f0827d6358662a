#!/usr/bin/env python
"""Cost of one renewal pass against the number of claims an engine holds (docs/benchmarks.md).

Target: O(1) SQL statements, flat from 10 to 100,000 held claims. For every size
this creates an engine holding that many claims (bulk-inserted, registered in its
ClaimRegistry), runs one pass to reach the steady state, then measures a pass:
statements (CaptureQueriesContext) and wall time (median of ``--passes``
passes), on the database clock as in production. It also measures the pass
that follows a revocation (the only pass that reads the engine's claims).

Each database gets scratch state of its own, created and removed by this script:
SQLite a temporary file, PostgreSQL a database ``weft_bench`` (dropped and
recreated) on ``--pg-url``. Every database runs in a child process of its own,
because Django reads DATABASE_URL once at startup.

    python bench/renewal_cost.py --db both --sizes 10,1000,10000,100000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# DEBUG off (as the benchmarks run) is production for the example settings, which
# then want a secret key of their own.
BENCH_SECRET_KEY = "weft-bench-not-a-deployment-key"
DEFAULT_SIZES = "10,1000,10000,100000"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated claim counts")
    parser.add_argument("--passes", type=int, default=9, help="timed passes per size (median)")
    parser.add_argument(
        "--pg-url",
        default="postgres://postgres@127.0.0.1:5432",
        help="PostgreSQL server (no database name); trust or password auth in the URL",
    )
    parser.add_argument("--pg-db", default="weft_bench", help="scratch database to (re)create")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.size_list = [int(part.replace("_", "")) for part in args.sizes.split(",") if part.strip()]
    return args


# -- the measurement, in a child process whose DATABASE_URL is the scratch database ----


def measure(sizes: list[int], passes: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", BENCH_SECRET_KEY)  # DEBUG off wants one
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from weft_django.conf import get_settings
    from weft_django.models import Claim, Engine
    from weft_django.ownership.claims.registry import ClaimRegistry
    from weft_django.ownership.claims.revoke import revoke_statement
    from weft_django.ownership.clock import db_now
    from weft_django.ownership.leases.engines import register_engine

    warnings.simplefilter("ignore")  # the lost-claim warnings of the revocation passes
    call_command("migrate", verbosity=0, interactive=False)
    config = get_settings()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            server = f"PostgreSQL {cursor.fetchone()[0]}"
    else:
        import sqlite3

        server = f"SQLite {sqlite3.sqlite_version} (file, WAL)"

    rows = []
    for size in sizes:
        Claim.objects.all().delete()
        Engine.objects.all().delete()
        engine = register_engine(config, kind="other", engine_id=f"bench-{size}")
        registry = ClaimRegistry(engine.id, settings=config)  # the database clock
        now = db_now()
        ids = [f"bench-{size}-{n:07d}" for n in range(size)]
        Claim.objects.bulk_create(
            (Claim(workflow_id=i, epoch=1, holder_id=engine.id, claimed_at=now) for i in ids),
            batch_size=5000,
        )
        for workflow_id in ids:
            registry._remember(workflow_id, 1)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

        registry.renew()  # first pass: from here on, the steady state
        with CaptureQueriesContext(connection) as queries:
            result = registry.renew()
        assert result.engine_renewed and not result.lost
        statements = len(queries.captured_queries)
        timings = []
        for _ in range(passes):
            started = time.perf_counter()
            result = registry.renew()
            timings.append(time.perf_counter() - started)
            assert result.engine_renewed and not result.lost
        assert len(result.held) == size

        # the pass after a revocation lists this engine's claims once
        revoked_timings, revoked_statements = [], []
        for n in range(min(3, size)):
            revoke_statement("default", ids[n])
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                result = registry.renew()
                revoked_timings.append(time.perf_counter() - started)
            assert [lost.workflow_id for lost in result.lost] == [ids[n]]
            revoked_statements.append(len(queries.captured_queries))
        registry.release_all()
        rows.append(
            {
                "claims": size,
                "statements": statements,
                "median_ms": statistics.median(timings) * 1000,
                "max_ms": max(timings) * 1000,
                "revoked_statements": max(revoked_statements),
                "revoked_median_ms": statistics.median(revoked_timings) * 1000,
            }
        )
    Claim.objects.all().delete()
    Engine.objects.all().delete()
    connection.close()
    return {"server": server, "rows": rows}


# -- the parent: scratch databases, children, the table -----------------------------


def run_child(database_url: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": BENCH_SECRET_KEY,
        "WEFT_LOG_LEVEL": "ERROR",
        "WEFT_OWNERSHIP": "workflow-lease",
    }
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--sizes",
        ",".join(map(str, args.size_list)),
        "--passes",
        str(args.passes),
    ]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"benchmark child for {database_url} failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_sqlite(args: argparse.Namespace) -> dict[str, Any]:
    scratch = tempfile.mkdtemp(prefix="weft_bench_")
    try:
        return run_child(f"sqlite:///{scratch}/bench.sqlite3", args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def bench_postgres(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg
    from psycopg import sql

    server = args.pg_url.rstrip("/")
    name = sql.Identifier(args.pg_db)
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
    try:
        return run_child(f"{server}/{args.pg_db}", args)
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def table(results: dict[str, dict[str, Any]]) -> str:
    header = (
        f"{'database':<10} {'claims held':>11} {'statements':>10} {'median ms':>10} "
        f"{'max ms':>8} | {'after a revocation:':>19} {'statements':>10} {'median ms':>10}"
    )
    lines = [header, "-" * len(header)]
    for db, result in results.items():
        for row in result["rows"]:
            lines.append(
                f"{db:<10} {row['claims']:>11,} {row['statements']:>10} "
                f"{row['median_ms']:>10.3f} {row['max_ms']:>8.3f} | {'':>19} "
                f"{row['revoked_statements']:>10} {row['revoked_median_ms']:>10.3f}"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.size_list, args.passes)))
        return 0
    databases = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    results = {}
    for db in databases:
        results[db] = bench_sqlite(args) if db == "sqlite" else bench_postgres(args)
    print("Renewal pass cost vs claims held (one engine; steady state = every pass after")
    print("the first; database clock, so each pass includes its clock read).")
    print()
    print(table(results))
    print()
    for db, result in results.items():
        print(f"{db}: {result['server']}")
    print(
        f"host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{args.passes} timed passes per size"
    )
    print("command: " + shlex.join(["python", "bench/renewal_cost.py", *argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
