"""What starting work costs: ``start()``, ``enqueue()`` and ``start_many()`` per
call, and tasks/s end to end, beside django-tasks-db's ``DatabaseBackend``.

    python bench/start_cost.py [--db postgresql,mysql,sqlite] [--calls 2000]
                               [--bulk 20000] [--e2e 3000] [--workers 2] [--concurrency 4]
                               [--dtdb-python PATH] [--dtdb-workers 4] [--no-dtdb] [--rounds 2]

Run it with an interpreter that has Django >= 6.0 (``enqueue()`` is Django's
Tasks API; on 5.2 its rows are left out). For each database of ``--db``, in a
child process on a fresh scratch database (no worker running): ``--calls``
calls of ``weft.start("it.noop_steps", 1)`` and of ``noop.enqueue()`` (the no-op
``@task`` of ``tests/integration/itapp/background.py``) one after the other, in
autocommit as from a view; and ``--bulk`` runs by ``weft.start_many`` in calls
of 1,000. Per call: wall ms, this process's CPU ms, statements sent and
transactions committed (counted on a separate pass of 50 calls with Django's
query capture: ``BEGIN``/``COMMIT`` markers; a write, or a ``NOTIFY``, outside
them commits alone; a plain read is not counted as a commit).

End to end (``--e2e`` tasks, PostgreSQL only, another scratch database):
``--workers`` ``weft_worker`` processes x ``--concurrency`` threads are
started and registered first, then one process enqueues the tasks as fast as
it can; tasks/s is the count over the window from the first run's
``created_at`` to the last one's ``finished_at``, and worker CPU ms/task the
user + system CPU all the workers' processes used from the first enqueue to
the last task's end (``/proc``; Linux), per task.

django-tasks-db (optional) runs the same ``@task`` in an interpreter of its
own (``--dtdb-python`` or ``WEFT_BENCH_DTDB_PYTHON``; e.g. ``python3.12 -m venv
/tmp/dtdb-venv && /tmp/dtdb-venv/bin/pip install 'Django~=6.1.0'
'psycopg[binary]' django-tasks-db``), in a throwaway project on its own
PostgreSQL scratch databases: the same enqueue cost measurement, and end to
end with ``--dtdb-workers`` ``manage.py db_worker --interval 0.05`` processes.

The machine is shared: ``--rounds`` rounds, each measuring weft on PostgreSQL
right before django-tasks-db (cost, then end to end), then the other
databases; every figure printed is the median of its rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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

COUNT_CALLS = 50
BULK_CALL = 1000
TIMING = {"WEFT_TICK_INTERVAL": "0.25"}


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes ``pids`` have used so far (Linux's
    ``/proc/<pid>/stat``; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def count_cost(captured: list[dict[str, Any]], in_transaction: bool = False) -> tuple[int, int]:
    """(statements, commits) of Django's captured queries (see the module doc)."""
    statements = commits = 0
    begun = in_transaction
    for query in captured:
        sql = str(query["sql"])
        if sql.startswith("BEGIN"):  # SQLite's BEGIN IMMEDIATE is sent, not counted
            begun = True
        elif sql in ("COMMIT", "ROLLBACK"):
            commits += sql == "COMMIT"
            begun = in_transaction
        else:
            statements += 1
            commits += not begun and (not sql.startswith("SELECT") or "pg_notify" in sql)
    return statements, commits


def measure(call: Callable[[], Any], calls: int, per_call: int = 1) -> dict[str, float]:
    """Per unit (a call, or a run of a call of ``per_call`` runs): wall ms, CPU ms,
    statements and commits."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counted = max(1, COUNT_CALLS // per_call)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(counted):
            call()
    statements, commits = count_cost(queries.captured_queries)
    began, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        call()
    wall_s, cpu_s = time.perf_counter() - began, time.process_time() - cpu
    units = calls * per_call
    return {
        "wall_ms": wall_s / units * 1e3,
        "cpu_ms": cpu_s / units * 1e3,
        "per_s": units / wall_s,
        "statements": statements / counted,
        "commits": commits / counted,
    }


def child(url: str, args: argparse.Namespace) -> None:
    """Per-call costs on the (migrated, empty) database at ``url``."""
    setup_django(url, **TIMING)
    import django

    import weft_django as weft

    result: dict[str, Any] = {}
    result["start()"] = measure(lambda: weft.start("it.noop_steps", 1), args.calls)
    if django.VERSION >= (6, 0):
        from tests.integration.itapp.background import noop

        result["enqueue()"] = measure(noop.enqueue, args.calls)
    requests = [weft.StartRequest("it.noop_steps", (1,)) for _ in range(BULK_CALL)]
    result["start_many(), per run"] = measure(
        lambda: weft.start_many(requests), max(1, args.bulk // BULK_CALL), BULK_CALL
    )
    print("RESULT " + json.dumps(result), flush=True)


def e2e_child(url: str, args: argparse.Namespace) -> None:
    """Tasks/s end to end: workers running, one process enqueuing."""
    setup_django(url, **TIMING)
    from django.db.models import Max, Min

    from tests.integration.itapp.background import noop
    from weft_django.models import RunStatus, WorkflowRun

    workers = Workers(url)
    extra = dict(item.split("=", 1) for item in args.worker_env)
    try:
        for index in range(args.workers):
            workers.wait_ready(
                workers.start(f"w{index}", concurrency=args.concurrency, **TIMING, **extra), 120
            )
        pids = [process.pid for process in workers.started]
        cpu_before = cpu_seconds(pids)
        began = time.perf_counter()
        for _ in range(args.e2e):
            noop.enqueue()
        enqueue_s = time.perf_counter() - began
        runs = WorkflowRun.objects.filter(workflow_name__startswith="django.tasks.")
        wait_for(
            lambda: runs.filter(status=RunStatus.COMPLETED).count() == args.e2e,
            args.timeout,
            interval=0.2,
            what="every task to complete",
        )
        worker_cpu = cpu_seconds(pids) - cpu_before
    finally:
        workers.kill_all()
    window = runs.aggregate(first=Min("created_at"), last=Max("finished_at"))
    seconds = (window["last"] - window["first"]).total_seconds()
    result = {
        "tasks": args.e2e,
        "seconds": seconds,
        "enqueue_per_s": args.e2e / enqueue_s,
        "worker_cpu_ms": worker_cpu / args.e2e * 1e3,
    }
    print("RESULT " + json.dumps(result), flush=True)


def run_child(flag: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), flag, url]
    for option in ("calls", "bulk", "e2e", "workers", "concurrency", "timeout"):
        argv += [f"--{option}", str(getattr(args, option))]
    for item in args.worker_env:
        argv += ["--worker-env", item]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT ") :]))
    raise SystemExit(f"measurement failed ({flag} {url}):\n{done.stdout}\n{done.stderr}")


# -- django-tasks-db, in its own interpreter and throwaway project -------------------

DTDB_WORKER = ("--interval", "0.05", "--no-startup-delay", "--worker-id")

DTDB_SETTINGS = """
import os
from urllib.parse import urlsplit
url = urlsplit(os.environ["DATABASE_URL"])
SECRET_KEY = "weft-bench-not-a-deployment-key"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django_tasks_db", "benchapp"]
DATABASES = {"default": {
    "ENGINE": "django.db.backends.postgresql", "NAME": url.path.lstrip("/"),
    "USER": url.username or "postgres", "PASSWORD": url.password or "",
    "HOST": url.hostname or "127.0.0.1", "PORT": url.port or 5432,
}}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
"""

DTDB_TASKS = """
from django.tasks import task


@task
def noop():
    return None
"""

DTDB_DRIVER = """
import json, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
import django
django.setup()
from typing import Any
from django.db import connection
from django.db.models import Max, Min
from django.test.utils import CaptureQueriesContext
from django_tasks_db.models import DBTaskResult
from pathlib import Path
from benchapp.tasks import noop

{count_cost}

{cpu_seconds}

role, count = sys.argv[1], int(sys.argv[2])
if role == "cost":
    with CaptureQueriesContext(connection) as queries:
        for _ in range({count_calls}):
            noop.enqueue()
    statements, commits = count_cost(queries.captured_queries)
    began, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        noop.enqueue()
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    DBTaskResult.objects.all().delete()
    print("RESULT " + json.dumps({{
        "wall_ms": wall / count * 1e3, "cpu_ms": cpu / count * 1e3, "per_s": count / wall,
        "statements": statements / {count_calls}, "commits": commits / {count_calls},
    }}), flush=True)
else:  # e2e: the workers are running
    pids = [int(pid) for pid in os.environ.get("WEFT_BENCH_WORKER_PIDS", "").split(",") if pid]
    cpu_before = cpu_seconds(pids)
    began = time.perf_counter()
    for _ in range(count):
        noop.enqueue()
    enqueue_s = time.perf_counter() - began
    deadline = time.monotonic() + float(sys.argv[3])
    while DBTaskResult.objects.filter(status="SUCCESSFUL").count() < count:
        if time.monotonic() > deadline:
            sys.exit("timed out")
        time.sleep(0.2)
    worker_cpu = cpu_seconds(pids) - cpu_before
    window = DBTaskResult.objects.aggregate(first=Min("enqueued_at"), last=Max("finished_at"))
    seconds = (window["last"] - window["first"]).total_seconds()
    print("RESULT " + json.dumps({{
        "tasks": count, "seconds": seconds, "enqueue_per_s": count / enqueue_s,
        "worker_cpu_ms": worker_cpu / count * 1e3,
    }}), flush=True)
"""


def find_dtdb_python(args: argparse.Namespace) -> tuple[str | None, str]:
    for candidate in (args.dtdb_python, os.environ.get("WEFT_BENCH_DTDB_PYTHON")):
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import django_tasks_db"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return candidate, ""
    return None, (
        "django-tasks-db run skipped: no interpreter with django_tasks_db (make a venv: "
        "'python3.12 -m venv /tmp/dtdb-venv && /tmp/dtdb-venv/bin/pip install "
        '"Django~=6.1.0" "psycopg[binary]" django-tasks-db\', then --dtdb-python '
        "/tmp/dtdb-venv/bin/python)"
    )


def dtdb_project() -> Path:
    import inspect

    root = Path(tempfile.mkdtemp(prefix="weft_bench_dtdb_"))
    (root / "benchapp").mkdir()
    (root / "benchapp" / "__init__.py").write_text("")
    (root / "benchapp" / "tasks.py").write_text(DTDB_TASKS)
    (root / "settings.py").write_text(DTDB_SETTINGS)
    (root / "manage.py").write_text(
        "import os, sys\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'settings')\n"
        "from django.core.management import execute_from_command_line\n"
        "execute_from_command_line(sys.argv)\n"
    )
    driver = DTDB_DRIVER.format(
        count_cost=textwrap.dedent(inspect.getsource(count_cost)),
        cpu_seconds=textwrap.dedent(inspect.getsource(cpu_seconds)),
        count_calls=COUNT_CALLS,
    )
    (root / "driver.py").write_text(driver)
    return root


def run_dtdb(
    python: str, root: Path, scratch: Scratch, args: argparse.Namespace, role: str
) -> dict[str, Any]:
    """One django-tasks-db measurement (``cost`` or ``e2e``) on a fresh database."""
    count = args.calls if role == "cost" else args.e2e
    url = scratch.postgres(f"_dtdb_{role}")
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=root, env=env, check=True)
    workers = []
    if role == "e2e":
        workers = [
            subprocess.Popen(
                [python, "manage.py", "db_worker", *DTDB_WORKER, f"w{index}"],
                cwd=root,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for index in range(args.dtdb_workers)
        ]
        time.sleep(3)  # let them start
        env["WEFT_BENCH_WORKER_PIDS"] = ",".join(str(worker.pid) for worker in workers)
    try:
        done = subprocess.run(
            [python, "driver.py", role, str(count), str(args.timeout)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                worker.kill()
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"django-tasks-db {role} failed:\n{done.stdout}\n{done.stderr}")
    return dict(json.loads(line[len("RESULT ") :]))


def median(results: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="postgresql", help="postgresql, mysql, sqlite (a list)")
    parser.add_argument("--calls", type=int, default=2000, help="start()/enqueue() calls timed")
    parser.add_argument("--bulk", type=int, default=20000, help="runs started by start_many")
    parser.add_argument("--e2e", type=int, default=3000, help="tasks end to end (0: none)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4, help="executor threads per worker")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--dtdb-python", default=None, help="interpreter with django-tasks-db")
    parser.add_argument("--dtdb-workers", type=int, default=4, help="db_worker processes")
    parser.add_argument("--no-dtdb", action="store_true", help="skip django-tasks-db")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (medians)")
    parser.add_argument(
        "--worker-env", action="append", default=[], help="KEY=VALUE for weft's workers"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--e2e-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    if args.e2e_child:
        e2e_child(args.e2e_child, args)
        return
    vendors = args.db.split(",")
    unknown = [vendor for vendor in vendors if vendor not in DATABASES]
    if unknown:
        parser.error(f"unknown --db {', '.join(unknown)}: use {', '.join(DATABASES)}")
    import django

    scratch = Scratch("start", keep=args.keep, pg_url=args.pg_url, mysql_url=args.mysql_url)
    raw_costs: dict[tuple[str, str], list[dict[str, float]]] = {}
    raw_ends: dict[str, list[dict[str, float]]] = {}
    notes: list[str] = []
    if django.VERSION < (6, 0):
        notes.append(f"enqueue() rows left out: Django {django.get_version()} has no django.tasks")
    python, why = (None, "django-tasks-db run skipped (--no-dtdb)")
    if not args.no_dtdb and "postgresql" in vendors:
        python, why = find_dtdb_python(args)
    if python is None:
        notes.append(why)
    root = dtdb_project()
    e2e = args.e2e and "postgresql" in vendors and django.VERSION >= (6, 0)
    # PostgreSQL first, each measurement of weft right before django-tasks-db's,
    # round after round: the two systems alternate on the shared machine.
    ordered = sorted(vendors, key=lambda vendor: vendor != "postgresql")
    try:
        for _ in range(args.rounds):
            for vendor in ordered:
                url = scratch.database(vendor)
                scratch.migrate(url)
                for name, figures in run_child("--child", url, args).items():
                    raw_costs.setdefault((f"weft_django, {DATABASES[vendor]}", name), []).append(
                        figures
                    )
                if vendor == "postgresql" and python is not None:
                    raw_costs.setdefault(("django-tasks-db, PostgreSQL", "enqueue()"), []).append(
                        run_dtdb(python, root, scratch, args, "cost")
                    )
                if vendor == "postgresql" and e2e:
                    url = scratch.postgres("_e2e")
                    scratch.migrate(url)
                    raw_ends.setdefault("weft_django, PostgreSQL", []).append(
                        run_child("--e2e-child", url, args)
                    )
                    if python is not None:
                        raw_ends.setdefault("django-tasks-db, PostgreSQL", []).append(
                            run_dtdb(python, root, scratch, args, "e2e")
                        )
    finally:
        scratch.drop_all()
        shutil.rmtree(root, ignore_errors=True)
    costs = [(system, call, median(found)) for (system, call), found in raw_costs.items()]
    ends = [(system, median(found)) for system, found in raw_ends.items()]

    print(
        f"\nstart_cost: {args.calls} calls each, start_many in calls of {BULK_CALL}, "
        f"{os.cpu_count()} CPU(s); medians of {args.rounds} alternating round(s)"
    )
    print_table(
        ["system", "call", "wall ms", "client CPU ms", "per second", "statements", "commits"],
        [
            (system, name, f["wall_ms"], f["cpu_ms"], f["per_s"], f["statements"], f["commits"])
            for system, name, f in costs
        ],
    )
    if ends:
        print(
            f"\nend to end: {args.e2e} no-op tasks enqueued by one process while the workers "
            f"run (weft: {args.workers} weft_worker x {args.concurrency} threads; "
            f"django-tasks-db: {args.dtdb_workers} db_worker processes)"
        )
        print_table(
            ["system", "tasks", "window (s)", "tasks/s", "enqueued/s", "worker CPU ms/task"],
            [
                (
                    s,
                    int(r["tasks"]),
                    r["seconds"],
                    r["tasks"] / r["seconds"],
                    r["enqueue_per_s"],
                    r["worker_cpu_ms"],
                )
                for s, r in ends
            ],
        )
    verdicts(costs, ends)
    for note in notes:
        print(note)
    print(f"command: cd {REPO} && {command_line()}")


def verdicts(
    costs: list[tuple[str, str, dict[str, float]]], ends: list[tuple[str, dict[str, float]]]
) -> None:
    def cost(system: str, call: str) -> dict[str, float] | None:
        return next((f for s, c, f in costs if s == system and c == call), None)

    ours = cost("weft_django, PostgreSQL", "enqueue()")
    theirs = cost("django-tasks-db, PostgreSQL", "enqueue()")
    if ours and theirs:
        ratio = theirs["wall_ms"] / ours["wall_ms"]
        verdict = "meets" if ratio >= 1 else "MISSES"
        print(
            f"enqueue() speed, weft / django-tasks-db = {ratio:.2f}x ({verdict} >= 1x, goal 1.5x)"
        )
    bulk = cost("weft_django, PostgreSQL", "start_many(), per run")
    if bulk:
        verdict = "meets" if bulk["per_s"] >= 5000 else "MISSES"
        print(f"start_many on PostgreSQL: {bulk['per_s']:.0f} runs/s ({verdict} >= 5,000)")
    rates = {s: r["tasks"] / r["seconds"] for s, r in ends}
    if len(rates) == 2:
        ratio = rates["weft_django, PostgreSQL"] / rates["django-tasks-db, PostgreSQL"]
        verdict = "meets" if ratio >= 3 else "MISSES"
        print(f"end-to-end tasks/s, weft / django-tasks-db = {ratio:.2f}x ({verdict} >= 3x)")


if __name__ == "__main__":
    main()
