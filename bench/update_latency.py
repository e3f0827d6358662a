#!/usr/bin/env python
"""Round trip of ``weft.update()`` from a process that owns nothing.

The benchmark process is the caller; the runs are held by a real
``manage.py weft_worker`` subprocess (default timings: fast tick 0.25 s,
renew interval 5 s, so the owner-side update poll never answers a sample).
Each sample is one ``weft.update(run, "add_item", ...)`` into an
``orders.cart`` run (the example project's workflow: a validated update
handler, a query, a signal wait) parked on its ``checkout`` signal; with 100
parked runs the samples go round-robin over them.

Samples are spaced by a random pause of 0 to ``--think`` ms (default: one
fast tick), so requests arrive at random points of the worker's tick cycle
rather than right after its previous turn.

``WEFT_NOTIFY`` on means LISTEN/NOTIFY on PostgreSQL and, on SQLite, the
worker's stand-in (it watches ``PRAGMA data_version``); off leaves the fast
tick (and the wake hint it reads) as the only wake-up.

Reported per configuration (database x NOTIFY x parked runs):

* p50 / p99   caller wall time of ``weft.update()`` (store, wake, apply, answer)
* owner p50   ``responded_at - created_at`` of the request row: from the
              request's commit to the answer's commit, on the database clock
* store p50   caller time inside ``update()`` before the request is committed
              (status read, read-only replay to pre-validate, insert + NOTIFY)
* notice p50  total - store - owner: how late the caller saw the answer

Every database is a scratch one: a temporary SQLite file, and a PostgreSQL
database (``weft_bench_updates``, dropped and re-created) on the server given
by ``--pg-url``. Each configuration runs in its own child process (Django
reads ``DATABASE_URL`` once) with its own fresh database and worker.

    python bench/update_latency.py                          # everything
    python bench/update_latency.py --db postgres --notify on --runs 1 --samples 300
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import signal
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
PG_DB = "weft_bench_updates"
DEFAULT_TIMINGS = {
    "WEFT_CLAIM_TTL": "30",
    "WEFT_CLAIM_RENEW_INTERVAL": "5",
    "WEFT_TICK_INTERVAL": "0.25",
}
ITEM = {"sku": "bench", "qty": 1, "price": 1.0}


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


# -- the child: one configuration --------------------------------------------------


def _child(
    db_url: str, notify: bool, runs: int, samples: int, warmup: int, think: float
) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "example_project.settings"
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SECRET_KEY", BENCH_SECRET_KEY)  # in case DEBUG is off
    os.environ["WEFT_NOTIFY"] = "true" if notify else "false"
    for key, value in DEFAULT_TIMINGS.items():
        os.environ[key] = value
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    import weft_django as weft
    from tests.integration.helpers import WorkerProcess, wait_for, worker_env
    from weft_django.api import updates
    from weft_django.models import (
        Claim,
        Engine,
        EngineStatus,
        RunStatus,
        UpdateRequest,
        WorkflowRun,
    )

    call_command("migrate", verbosity=0)
    url = db_url
    if connection.vendor == "sqlite":
        url = f"sqlite:///{Path(connection.settings_dict['NAME']).resolve()}"

    # Time spent before the request is committed: wrap the store step's last call.
    stored_at: list[float] = []
    real_wait = updates.wait_for_response

    def timed_wait(*args: Any, **kwargs: Any) -> Any:
        stored_at.append(time.perf_counter())
        return real_wait(*args, **kwargs)

    updates.wait_for_response = timed_wait  # type: ignore[assignment]

    log_dir = Path(tempfile.mkdtemp(prefix="weft_bench_updates_"))
    env = worker_env(
        url,
        settings="example_project.settings",
        WEFT_NOTIFY="true" if notify else "false",
        WEFT_LOG_LEVEL="WARNING",
        **DEFAULT_TIMINGS,
    )
    worker = WorkerProcess("worker", env, log_dir, ["--concurrency", "4", "--shutdown-grace", "5"])
    try:
        engine_id = wait_for(
            lambda: (
                Engine.objects.filter(pid=worker.pid, status=EngineStatus.RUNNING)
                .values_list("id", flat=True)
                .first()
            ),
            60,
            what="the worker to register",
        )
        run_ids = [
            weft.start("orders.cart", f"c{i}", workflow_id=f"cart-{i}").id for i in range(runs)
        ]

        def all_parked() -> bool:
            waiting = WorkflowRun.objects.filter(pk__in=run_ids, status=RunStatus.WAITING).count()
            held = Claim.objects.filter(workflow_id__in=run_ids, holder_id=engine_id).count()
            return waiting == held == runs

        wait_for(all_parked, 120, interval=0.05, what=f"{runs} runs to park")
        for index in range(warmup):
            weft.update(run_ids[index % runs], "add_item", ITEM, timeout=30)

        totals: list[float] = []
        stores: list[float] = []
        owners: list[float] = []
        pauses = random.Random(7)
        for index in range(samples):
            time.sleep(pauses.uniform(0, think / 1000.0))
            run_id = run_ids[index % runs]
            began = time.perf_counter()
            update_id = f"s{index}"
            weft.update(run_id, "add_item", ITEM, timeout=30, update_id=update_id)
            ended = time.perf_counter()
            totals.append(ended - began)
            stores.append(stored_at[-1] - began)
            created, responded = UpdateRequest.objects.values_list(
                "created_at", "responded_at"
            ).get(run_id=run_id, update_id=update_id)
            owners.append((responded - created).total_seconds())
    except BaseException:
        print(worker.tail(), file=sys.stderr)
        raise
    finally:
        if worker.alive:
            worker.send(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
    shutil.rmtree(log_dir, ignore_errors=True)
    notices = [t - s - o for t, s, o in zip(totals, stores, owners, strict=True)]
    ms = 1000.0
    return {
        "samples": samples,
        "p50": statistics.median(totals) * ms,
        "p99": _pct(totals, 99) * ms,
        "owner_p50": statistics.median(owners) * ms,
        "store_p50": statistics.median(stores) * ms,
        "notice_p50": statistics.median(notices) * ms,
    }


# -- the parent: scratch databases, one child per configuration ----------------------


def _sqlite_url() -> str:
    handle, path = tempfile.mkstemp(prefix="weft_bench_updates_", suffix=".sqlite3")
    os.close(handle)
    os.unlink(path)
    return f"sqlite:///{path}"


def _fresh_pg(pg_url: str, *, drop_only: bool = False) -> str:
    import environ
    import psycopg

    cfg = environ.Env.db_url_config(pg_url)
    params = {
        "host": cfg["HOST"] or "127.0.0.1",
        "port": cfg["PORT"] or 5432,
        "user": cfg["USER"] or None,
        "password": cfg["PASSWORD"] or None,
        "dbname": "postgres",
        "autocommit": True,
    }
    with psycopg.connect(**params) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{PG_DB}"')
    base = pg_url.rsplit("/", 1)[0]
    return f"{base}/{PG_DB}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--notify", choices=["on", "off", "both"], default="both")
    parser.add_argument("--runs", default="1,100", help="parked-run counts, comma-separated")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--think", type=float, default=250.0, help="max ms between samples")
    parser.add_argument("--pg-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(_child(**spec)))
        return 0

    dbs = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    notifies = [False, True] if args.notify == "both" else [args.notify == "on"]
    run_counts = [int(n) for n in args.runs.split(",") if n]
    rows: list[tuple[str, str, int, dict[str, Any]]] = []
    for db in dbs:
        for notify in notifies:
            for runs in run_counts:
                url = _sqlite_url() if db == "sqlite" else _fresh_pg(args.pg_url)
                spec = {
                    "db_url": url,
                    "notify": notify,
                    "runs": runs,
                    "samples": args.samples,
                    "warmup": args.warmup,
                    "think": args.think,
                }
                label = "on" if notify else "off"
                print(f"... {db}, NOTIFY {label}, {runs} parked run(s)", file=sys.stderr)
                done = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps(spec)],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    print(done.stdout, done.stderr, file=sys.stderr)
                    return 1
                rows.append((db, label, runs, json.loads(done.stdout.strip().splitlines()[-1])))
                if db == "sqlite":
                    for suffix in ("", "-wal", "-shm"):
                        Path(url.removeprefix("sqlite:///") + suffix).unlink(missing_ok=True)
    if "postgres" in dbs:
        _fresh_pg(args.pg_url, drop_only=True)  # scratch: leave nothing behind

    print()
    print("weft.update() round trip from a non-owning process (ms); worker: fast tick 0.25 s,")
    print(
        f"renew 5 s, concurrency 4; 0-{args.think:g} ms between samples; caller and worker"
        " on one machine"
    )
    header = (
        f"{'database':<10} {'NOTIFY':<6} {'parked':>6} {'samples':>7} {'p50':>7} {'p99':>7}"
        f" {'owner p50':>9} {'store p50':>9} {'notice p50':>10}"
    )
    print(header)
    print("-" * len(header))
    for db, label, runs, r in rows:
        print(
            f"{db:<10} {label:<6} {runs:>6} {r['samples']:>7} {r['p50']:>7.1f} {r['p99']:>7.1f}"
            f" {r['owner_p50']:>9.1f} {r['store_p50']:>9.1f} {r['notice_p50']:>10.1f}"
        )
    print(
        "NOTIFY on: LISTEN/NOTIFY on PostgreSQL; on SQLite the worker's stand-in, a watch"
        " of PRAGMA data_version every 10 ms"
    )
    print()
    print("command: " + shlex.join([sys.executable, "bench/update_latency.py", *sys.argv[1:]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
