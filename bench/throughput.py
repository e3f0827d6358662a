"""Throughput: N worker processes, R runs of an S-step no-op workflow, per database.

    python bench/throughput.py [--runs 1000] [--steps 10] [--workers 2] [--concurrency 4]
                               [--db postgresql,mysql]

All runs are stored first (``weft.start``), then the workers start together;
the measured window is the database's own record of the work: from the first
run's ``started_at`` to the last run's ``finished_at``. Reports completions/s
and steps/s (docs/benchmarks.md: at least 5x DBOS Transact's steps/s on the same
database and machine, measured in one run). ``--db`` lists the databases
weft_django runs on (``postgresql``, ``mysql``, ``sqlite``; default
PostgreSQL), one after the other, each in a child process of this script
(``--child``: Django is configured once per process).

The DBOS Transact run (optional, separate database) needs the ``dbos``
package: in this interpreter, or in the one named by ``--dbos-python`` /
``WEFT_BENCH_DBOS_PYTHON`` (e.g. a venv made with ``python -m venv
/tmp/dbos-venv && /tmp/dbos-venv/bin/pip install dbos``; a separate venv keeps
DBOS's dependencies out of the project's environment). It runs the
equivalent workflow, ``@DBOS.workflow`` calling ``@DBOS.step`` S times,
enqueued on a DBOS queue served by the same number of worker processes,
measured the same way (first ``started_at_epoch_ms`` to last
``completed_at``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    DATABASES,
    REPO,
    Scratch,
    Workers,
    base_parser,
    command_line,
    print_table,
    setup_django,
    wait_for,
)

DBOS_APP = textwrap.dedent(
    """
    import os, sys
    from dbos import DBOS, DBOSClient

    url, role, runs, steps, concurrency = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    if role == "enqueue":  # from outside the application, like weft.start from a view
        client = DBOSClient(system_database_url=url)
        options = {"workflow_name": "noop_steps", "queue_name": "bench"}
        for _ in range(runs):
            client.enqueue(options, steps)
        client.destroy()
        sys.exit(0)

    DBOS(config={
        "name": "weftbench",
        "system_database_url": url,
        "log_level": "WARNING",
        "executor_id": f"{role}-{os.getpid()}",
    })

    @DBOS.step()
    def noop(index):
        return index

    @DBOS.workflow(name="noop_steps")
    def noop_steps(n):
        for index in range(n):
            noop(index)
        return n

    DBOS.launch()
    DBOS.register_queue("bench", worker_concurrency=concurrency, polling_interval_sec=0.05)
    if role == "serve":
        print("ready", flush=True)
        sys.stdin.read()  # serve the queue until the parent closes our stdin
    DBOS.destroy()
    """
)


TIMING = {
    "WEFT_CLAIM_TTL": "30",
    "WEFT_CLAIM_RENEW_INTERVAL": "5",
    "WEFT_TICK_INTERVAL": "0.25",
}


def child(url: str, args) -> None:
    """Measure weft_django on the (migrated, empty) database at ``url``."""
    setup_django(url, **TIMING)
    from django.db.models import Max, Min

    import weft_django as weft
    from weft_django.models import RunStatus, WorkflowEvent, WorkflowRun

    began = time.monotonic()
    for index in range(args.runs):
        weft.start("it.noop_steps", args.steps, workflow_id=f"tp-{index:05d}")
    enqueue_s = time.monotonic() - began

    workers = Workers(url)
    try:
        for index in range(args.workers):
            workers.start(f"w{index}", concurrency=args.concurrency, **TIMING)
        done = wait_for(
            lambda: WorkflowRun.objects.filter(status=RunStatus.COMPLETED).count() == args.runs,
            args.timeout,
            interval=0.2,
            what="every run to complete",
        )
        assert done
    finally:
        workers.kill_all()
    window = WorkflowRun.objects.aggregate(first=Min("started_at"), last=Max("finished_at"))
    seconds = (window["last"] - window["first"]).total_seconds()
    steps = WorkflowEvent.objects.filter(kind="step").count()
    assert steps == args.runs * args.steps, steps
    engines = WorkflowEvent.objects.values("engine_id").distinct().count()
    result = {"seconds": seconds, "enqueue_s": enqueue_s, "steps": steps, "engines": engines}
    print("RESULT " + json.dumps(result), flush=True)


def run_weft(args, scratch: Scratch, vendor: str) -> dict[str, float]:
    url = scratch.database(vendor, "_weft")
    scratch.migrate(url)
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", url]
    for option in ("runs", "steps", "workers", "concurrency", "timeout"):
        argv += [f"--{option}", str(getattr(args, option))]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise SystemExit(f"measurement failed on {vendor}:\n{done.stdout}\n{done.stderr}")


def find_dbos_python(args) -> tuple[str | None, str]:
    candidates = [args.dbos_python, os.environ.get("WEFT_BENCH_DBOS_PYTHON"), sys.executable]
    for candidate in candidates:
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import dbos"], capture_output=True, text=True, check=False
        )
        if probe.returncode == 0:
            return candidate, ""
    return None, (
        "DBOS Transact is not installed here (no interpreter with 'import dbos'); "
        "install it in a venv ('python -m venv /tmp/dbos-venv && /tmp/dbos-venv/bin/pip "
        "install dbos') and pass --dbos-python /tmp/dbos-venv/bin/python"
    )


def run_dbos(args, scratch: Scratch, python: str) -> dict[str, float]:
    import psycopg

    url = scratch.postgres("_dbos").replace("postgres://", "postgresql://", 1)
    app = Path(scratch_dir()) / "dbos_bench_app.py"
    app.write_text(DBOS_APP)
    common = [str(args.runs), str(args.steps), str(args.concurrency)]
    # Create the DBOS schema and the queue, then enqueue everything before any worker runs.
    for role in ("setup", "enqueue"):
        subprocess.run([python, str(app), url, role, *common], check=True, capture_output=True)
    workers = [
        subprocess.Popen(
            [python, str(app), url, "serve", *common],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(args.workers)
    ]
    try:
        with psycopg.connect(url.replace("postgresql://", "postgres://", 1)) as conn:

            def finished() -> bool:
                row = conn.execute(
                    "SELECT count(*) FROM dbos.workflow_status "
                    "WHERE queue_name = 'bench' AND status = 'SUCCESS'"
                ).fetchone()
                conn.commit()
                return row[0] == args.runs

            wait_for(finished, args.timeout, interval=0.2, what="every DBOS workflow to finish")
            first, last = conn.execute(
                "SELECT min(started_at_epoch_ms), max(completed_at) FROM dbos.workflow_status "
                "WHERE queue_name = 'bench'"
            ).fetchone()
            steps = conn.execute("SELECT count(*) FROM dbos.operation_outputs").fetchone()[0]
            executors = conn.execute(
                "SELECT count(DISTINCT executor_id) FROM dbos.workflow_status "
                "WHERE queue_name = 'bench'"
            ).fetchone()[0]
    finally:
        for worker in workers:
            if worker.stdin:
                worker.stdin.close()
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
    return {"seconds": (last - first) / 1000.0, "steps": steps, "engines": executors}


_SCRATCH_DIR: list[str] = []


def scratch_dir() -> str:
    if not _SCRATCH_DIR:
        import tempfile

        _SCRATCH_DIR.append(tempfile.mkdtemp(prefix="weft_bench_tp_"))
    return _SCRATCH_DIR[0]


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4, help="executor threads per worker")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--db", default="postgresql", help="postgresql, mysql, sqlite (a list)")
    parser.add_argument("--dbos-python", default=None, help="interpreter that has dbos")
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS Transact run")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    vendors = args.db.split(",")
    unknown = [vendor for vendor in vendors if vendor not in DATABASES]
    if unknown:
        parser.error(f"unknown --db {', '.join(unknown)}: use {', '.join(DATABASES)}")

    scratch = Scratch("throughput", keep=args.keep, pg_url=args.pg_url, mysql_url=args.mysql_url)
    rows = []
    note = ""
    try:
        for vendor in vendors:
            rows.append((f"weft_django, {DATABASES[vendor]}", run_weft(args, scratch, vendor)))
        if args.no_dbos or "postgresql" not in vendors:
            note = "DBOS Transact run skipped (--no-dbos, or no PostgreSQL in --db)."
        else:
            python, why = find_dbos_python(args)
            if python is None:
                note = why
            else:
                rows.append(("DBOS Transact, PostgreSQL", run_dbos(args, scratch, python)))
    finally:
        scratch.drop_all()
        if _SCRATCH_DIR:
            shutil.rmtree(_SCRATCH_DIR[0], ignore_errors=True)

    cpu = os.cpu_count()
    print(
        f"\nthroughput: {args.workers} worker processes x {args.concurrency} threads, "
        f"{args.runs} runs x {args.steps} no-op steps, {cpu} CPU(s)"
    )
    table = []
    for name, result in rows:
        seconds = result["seconds"]
        table.append(
            (
                name,
                int(result["steps"]),
                int(result["engines"]),
                seconds,
                args.runs / seconds,
                result["steps"] / seconds,
            )
        )
    print_table(
        ["system", "steps", "processes used", "window (s)", "completions/s", "steps/s"], table
    )
    weft_pg = [row for row in table if row[0] == "weft_django, PostgreSQL"]
    dbos = [row for row in table if row[0].startswith("DBOS")]
    if weft_pg and dbos:
        ratio = weft_pg[0][5] / dbos[0][5]
        verdict = "meets" if ratio >= 5 else "MISSES"
        print(f"weft_django / DBOS steps/s, PostgreSQL = {ratio:.2f}x ({verdict} the >= 5x target)")
    if note:
        print(note)
    print(f"command: cd {REPO} && {command_line()}")


if __name__ == "__main__":
    main()
