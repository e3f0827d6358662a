"""What one fenced checkpoint costs on PostgreSQL, prepared or not.

    python bench/statement_cost.py [--writes 3000] [--groups 1,4] [--held 20000]

One scratch database; ``--held`` runs held by one engine (loaded in bulk,
then analysed); then, in a child process per configuration, ``--writes``
fenced checkpoint statements (``fenced_writes.fenced_write_many``, each its own
commit) of a group of G runs, one after the other on one connection:

* ``unprepared``: Django's default ``prepare_threshold`` of None, the values
  written into the statement text (client-side binding), planned every time;
* ``prepared``: ``OPTIONS["prepare_threshold"] = 5`` (the example project's),
  the statement bound server-side and prepared by psycopg, PostgreSQL reusing
  its plan (``weft_django/ownership/writes/cursor.py``).

Per statement: wall time, this process's CPU, and the CPU of its PostgreSQL
backend (``/proc/<pid>/stat`` of ``pg_backend_pid()``; the server must be on
this machine). docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REPO,
    Scratch,
    base_parser,
    child_result,
    command_line,
    print_table,
    setup_django,
)

MODES = {"unprepared": None, "prepared": 5}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(url: str, mode: str, group: int, first: int, writes: int) -> None:
    setup_django(url)
    from django.db import connection
    from django.utils import timezone

    from weft_django.models import Claim
    from weft_django.ownership.writes.single import FencedWrite, fenced_write_many

    connection.ensure_connection()
    connection.connection.prepare_threshold = MODES[mode]
    engine_id = Claim.objects.values_list("holder_id", flat=True).first()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    runs = [f"p-{index}" for index in range(first, first + group)]  # runs of its own
    seq = 0

    def write() -> None:
        nonlocal seq
        seq += 1
        now = timezone.now()
        requests = [
            FencedWrite(run, 1, [(run, seq, "step", "noop", "1", None, engine_id, 1, now)])
            for run in runs
        ]
        if fenced_write_many("default", engine_id=engine_id, requests=requests) != set(runs):
            raise SystemExit("a fenced write found its claim gone")

    for _ in range(20):  # past the prepare threshold and PostgreSQL's first custom plans
        write()
    backend_began = _cpu_seconds(backend)
    cpu_began, began = time.process_time(), time.perf_counter()
    for _ in range(writes):
        write()
    wall = time.perf_counter() - began
    result = {
        "wall_ms": wall / writes * 1000,
        "client_ms": (time.process_time() - cpu_began) / writes * 1000,
        "backend_ms": (_cpu_seconds(backend) - backend_began) / writes * 1000,
        "per_s": writes / wall,
    }
    print("RESULT " + json.dumps(result))


def load(url: str, held: int) -> None:
    setup_django(url)
    from django.db import connection

    sys.path.insert(0, str(REPO))
    from tests.factories import EngineFactory
    from tests.plans import load_held_parked

    engine = EngineFactory()
    load_held_parked(engine.id, held)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE weft_django_workflowrun SET status = 'running', waiting_on = NULL")
        cursor.execute("ANALYZE")
    print("RESULT {}")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=3000, help="statements measured per row")
    parser.add_argument("--groups", default="1,4", help="runs per statement (group sizes)")
    parser.add_argument("--held", type=int, default=20_000, help="runs held by the engine")
    parser.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        url, role, *rest = args.child
        if role == "load":
            load(url, args.held)
        else:
            child(url, role, int(rest[0]), int(rest[1]), args.writes)
        return

    scratch = Scratch("statement_cost", keep=args.keep, pg_url=args.pg_url)
    try:
        url = scratch.postgres()
        scratch.migrate(url)
        common = ["--held", str(args.held), "--writes", str(args.writes)]
        child_result(__file__, [url, "load", *common[:2]], "the load")
        rows = []
        first = 0
        for group in [int(value) for value in args.groups.split(",")]:
            for mode in MODES:
                argv = [url, mode, str(group), str(first), *common]
                result = child_result(__file__, argv, mode)
                first += group
                rows.append(
                    [
                        mode,
                        group,
                        f"{result['wall_ms']:.3f}",
                        f"{result['client_ms']:.3f}",
                        f"{result['backend_ms']:.3f}",
                        f"{result['per_s']:.0f}",
                    ]
                )
    finally:
        scratch.drop_all()
    print(
        f"\none fenced checkpoint statement (its own commit), one connection, "
        f"{args.held:,} runs held, PostgreSQL"
    )
    print_table(
        [
            "statement",
            "runs per statement",
            "wall ms",
            "client CPU ms",
            "PostgreSQL CPU ms",
            "statements/s",
        ],
        rows,
    )
    print(f"command: {command_line()}")


if __name__ == "__main__":
    main()
