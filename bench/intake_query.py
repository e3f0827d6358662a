"""Pickup cost against the backlog: the intake's window vs the query it replaced.

    python bench/intake_query.py [--pending 50000] [--parked 0,50000,100000]
                                 [--repeat 30] [--db postgresql,mysql]

For each database (a scratch database each, in a child process of this
script) and each parked count: the run and claim tables are emptied and
loaded in bulk with ``--parked`` waiting runs (older, each with a held claim)
and ``--pending`` pending runs, with automatic statistics switched off for
both tables and no ANALYZE: the state right after a burst, before autovacuum
has looked. Then each query is timed ``--repeat`` times (median, p90):

* **new**: the intake's window (weft_django/ownership/claims/intake.py) for a free
  capacity of 16 (64 rows per branch), read-only;
* **old**: the pickup query before issue 11 (``scans.pending_claimable``:
  due pending runs without a holder, ``NOT EXISTS`` on the claims, ordered by
  ``created_at``, ``SELECT ... FOR UPDATE SKIP LOCKED`` of 16 rows in a
  transaction that is rolled back).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATABASES, Scratch, base_parser, command_line, print_table, setup_django

NAMES = ["bench.intake"]
CAPACITY = 16


def load(pending: int, parked: int, engine_id: str) -> None:
    from django.db import connection

    from weft_django.models import Claim, WorkflowRun

    run = connection.ops.quote_name(WorkflowRun._meta.db_table)
    claim = connection.ops.quote_name(Claim._meta.db_table)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    columns = (
        "(id, workflow_name, workflow_version, status, args, kwargs, parent_id, "
        "created_at, updated_at)"
    )
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {claim}")
        cursor.execute(f"DELETE FROM {run}")
        if connection.vendor == "postgresql":
            for table in (run, claim):
                cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            cursor.execute(
                f"INSERT INTO {run} {columns} SELECT 'run-' || lpad(n::text, 7, '0'), %s, 1, "
                "CASE WHEN n < %s THEN 'waiting' ELSE 'pending' END, '[]', '{}', '', "
                "%s + n * interval '1 millisecond', %s FROM generate_series(0, %s) n",
                [NAMES[0], parked, base, base, pending + parked - 1],
            )
            if parked:
                cursor.execute(
                    f"INSERT INTO {claim} (workflow_id, epoch, holder_id, claimed_at) "
                    "SELECT 'run-' || lpad(n::text, 7, '0'), 1, %s, %s "
                    "FROM generate_series(0, %s) n",
                    [engine_id, base, parked - 1],
                )
            return
        if connection.vendor == "mysql":
            for table in (run, claim):
                cursor.execute(f"ALTER TABLE {table} STATS_AUTO_RECALC=0")
        ops = connection.ops
        stamp = ops.adapt_datetimefield_value(base)
        rows = [
            (
                f"run-{n:07d}",
                NAMES[0],
                1,
                "waiting" if n < parked else "pending",
                "[]",
                "{}",
                "",
                ops.adapt_datetimefield_value(base + timedelta(milliseconds=n)),
                stamp,
            )
            for n in range(pending + parked)
        ]
        for start in range(0, len(rows), 2000):
            cursor.executemany(
                f"INSERT INTO {run} {columns} VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows[start : start + 2000],
            )
        claims = [(f"run-{n:07d}", engine_id, stamp) for n in range(parked)]
        for start in range(0, len(claims), 2000):
            cursor.executemany(
                f"INSERT INTO {claim} (workflow_id, epoch, holder_id, claimed_at) "
                "VALUES (%s, 1, %s, %s)",
                claims[start : start + 2000],
            )


def old_query(now: datetime) -> list[Any]:
    """``scans.pending_claimable`` and ``WorkflowLeaseOwnership.claim_pending``'s
    locking read, as they were before the ready queue."""
    from django.db import connection, transaction
    from django.db.models import Exists, OuterRef, Q, Subquery, Value
    from django.db.models.functions import Coalesce

    from weft_django.models import Claim, RunStatus, WorkflowRun

    query = (
        WorkflowRun.objects.filter(status=RunStatus.PENDING)
        .filter(Q(start_at__isnull=True) | Q(start_at__lte=now))
        .order_by("created_at", "pk")
        .filter(workflow_name__in=NAMES)
        .filter(~Exists(Claim.objects.filter(workflow_id=OuterRef("pk"), holder__isnull=False)))
        .annotate(
            claim_epoch=Coalesce(
                Subquery(Claim.objects.filter(workflow_id=OuterRef("pk")).values("epoch")[:1]),
                Value(0),
            )
        )
    )
    features = connection.features
    of = ("self",) if features.has_select_for_update_of else ()
    with transaction.atomic():
        rows = list(
            query.select_for_update(skip_locked=True, of=of).values_list("pk", "claim_epoch")[
                :CAPACITY
            ]
        )
        transaction.set_rollback(True)
    return rows


def child(url: str, args: argparse.Namespace) -> None:
    setup_django(url)
    from django.core.management import call_command
    from django.db import connection

    from weft_django.conf import get_settings
    from weft_django.ownership.claims.intake import WINDOW_FACTOR, ready_window
    from weft_django.ownership.clock import db_now
    from weft_django.ownership.leases.engines import register_engine

    call_command("migrate", verbosity=0, interactive=False)
    engine = register_engine(get_settings(), kind="other", engine_id="bench-intake")
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        server = cursor.fetchone()[0].split(" on ")[0]
    for parked in [int(p) for p in args.parked.split(",")]:
        began = time.monotonic()
        load(args.pending, parked, engine.id)
        loaded = time.monotonic() - began
        now = db_now()
        queries = {
            "new": lambda now=now: ready_window(now, NAMES, WINDOW_FACTOR * CAPACITY),
            "old": lambda now=now: old_query(now),
        }
        for name, run in queries.items():
            found = run()  # once untimed (connection warm)
            timings = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                run()
                timings.append((time.perf_counter() - started) * 1000)
            timings.sort()
            print(
                "ROW",
                DATABASES[connection.vendor],
                server,
                args.pending,
                parked,
                name,
                len(found),
                round(statistics.median(timings), 2),
                round(timings[int(len(timings) * 0.9) - 1], 2),
                round(loaded, 1),
                sep="\t",
                flush=True,
            )


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=50_000)
    parser.add_argument("--parked", default="0,50000,100000")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--db", default="postgresql,mysql")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    scratch = Scratch("intake", keep=args.keep, pg_url=args.pg_url, mysql_url=args.mysql_url)
    rows = []
    try:
        for vendor in args.db.split(","):
            url = scratch.database(vendor)
            argv = [sys.executable, str(Path(__file__).resolve()), "--child", url]
            argv += ["--pending", str(args.pending), "--parked", args.parked]
            argv += ["--repeat", str(args.repeat)]
            result = subprocess.run(argv, capture_output=True, text=True, check=False)
            if result.returncode:
                raise SystemExit(f"{vendor} failed:\n{result.stdout}{result.stderr}")
            rows += [
                line.split("\t")[1:]
                for line in result.stdout.splitlines()
                if line.startswith("ROW")
            ]
    finally:
        scratch.drop_all()
    print_table(
        [
            "database",
            "server",
            "pending",
            "parked",
            "query",
            "rows",
            "median ms",
            "p90 ms",
            "load s",
        ],
        rows,
    )
    print(f"\n$ {command_line()}")


if __name__ == "__main__":
    main()
