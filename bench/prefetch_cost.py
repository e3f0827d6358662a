"""What the read of an intake batch's first turns costs, as SQL or as a queryset.

    python bench/prefetch_cost.py [--reads 2000] [--batches 1,4,16] [--db postgresql,mysql,sqlite]

The worker reads the first turns of every batch of new runs it claims in one
statement (``weft_django/runtime/prefetch.read_first_turns``): the run's
fields, whether a signal is buffered, whether update requests are pending,
and the database clock. It runs on the thread that claims new work, once per
batch. Per database, a scratch database with 16 pending runs (one with a
buffered signal, one with a pending update request); then, in a child
process, ``--reads`` reads of a batch of B runs, each way:

* ``sql``: ``read_first_turns`` as it is, hand-written SQL with the values
  converted as the ORM gives them;
* ``queryset``: the same read built by the ORM each time (a ``filter``, two
  ``Exists`` annotations, ``values()``), as it was before.

Per read: wall time and this process's CPU. docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Scratch, base_parser, child_result, command_line, print_table, setup_django

RUNS = 16


def _queryset_read(run_ids: list[str]) -> list[dict[str, Any]]:
    from django.db.models import Exists, OuterRef

    from weft_django.models import (
        RunStatus,
        UpdateRequest,
        UpdateStatus,
        WorkflowRun,
        WorkflowSignal,
    )
    from weft_django.ownership.clock import DbNow
    from weft_django.runtime.prefetch import SIGNALS_BUFFERED, UPDATES_PENDING
    from weft_django.runtime.runs import RUN_FIELDS

    signals = WorkflowSignal.objects.filter(run_id=OuterRef("pk"), consumed_at__isnull=True)
    updates = UpdateRequest.objects.filter(run_id=OuterRef("pk"), status=UpdateStatus.PENDING)
    return list(
        WorkflowRun.objects.filter(pk__in=run_ids, status=RunStatus.PENDING)
        .annotate(
            **{SIGNALS_BUFFERED: Exists(signals), UPDATES_PENDING: Exists(updates)},
            db_now=DbNow(),
        )
        .values(*RUN_FIELDS, SIGNALS_BUFFERED, UPDATES_PENDING, "db_now")
    )


def child(url: str, way: str, batch: int, reads: int) -> None:
    setup_django(url)
    from weft_django.runtime.prefetch import read_first_turns

    ids = [f"pf-{index}" for index in range(batch)]
    read: Callable[[], list[dict[str, Any]]]
    if way == "sql":

        def read() -> list[dict[str, Any]]:
            return read_first_turns(ids, using="default")
    else:

        def read() -> list[dict[str, Any]]:
            return _queryset_read(ids)

    for _ in range(50):
        if len(read()) != batch:
            raise SystemExit("the read missed runs")
    cpu_began, began = time.process_time(), time.perf_counter()
    for _ in range(reads):
        read()
    wall = time.perf_counter() - began
    result = {
        "wall_ms": wall / reads * 1000,
        "cpu_ms": (time.process_time() - cpu_began) / reads * 1000,
    }
    print("RESULT " + json.dumps(result))


def load(url: str) -> None:
    setup_django(url)
    from weft_django.models import UpdateRequest, WorkflowRun, WorkflowSignal

    WorkflowRun.objects.bulk_create(
        WorkflowRun(
            id=f"pf-{index}",
            workflow_name="orders.cart",
            args=[index, {"sku": "A-1", "qty": 2}],
            kwargs={"note": "ü"},
        )
        for index in range(RUNS)
    )
    WorkflowSignal.objects.create(run_id="pf-0", signal_id="s", name="go")
    UpdateRequest.objects.create(run_id="pf-1", update_id="u", name="add")
    print("RESULT {}")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=2000, help="reads measured per row")
    parser.add_argument("--batches", default="1,4,16", help="runs per read (batch sizes)")
    parser.add_argument("--db", default="postgresql,mysql,sqlite", help="databases to measure")
    parser.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        url, role, *rest = args.child
        if role == "load":
            load(url)
        else:
            child(url, role, int(rest[0]), args.reads)
        return

    batches = [int(value) for value in args.batches.split(",")]
    if any(not 1 <= batch <= RUNS for batch in batches):
        raise SystemExit(f"--batches: each between 1 and {RUNS}")
    scratch = Scratch("prefetch_cost", keep=args.keep, pg_url=args.pg_url, mysql_url=args.mysql_url)
    rows = []
    try:
        for vendor in args.db.split(","):
            url = scratch.database(vendor)
            scratch.migrate(url)
            child_result(__file__, [url, "load"], "the load")
            for batch in batches:
                for way in ("queryset", "sql"):
                    result = child_result(__file__, [url, way, str(batch)], way)
                    rows.append(
                        [vendor, batch, way, f"{result['wall_ms']:.3f}", f"{result['cpu_ms']:.3f}"]
                    )
    finally:
        scratch.drop_all()
    print(f"\nthe first-turn read of an intake batch, one connection, {args.reads:,} reads a row")
    print_table(["database", "runs per read", "read", "wall ms", "client CPU ms"], rows)
    print(f"command: {command_line()}")


if __name__ == "__main__":
    main()
