#!/usr/bin/env python
"""The Celery signal poll pass over stranded runs (docs/benchmarks.md).

Question: how fast does one store-wide pass (``weft_django.signal_poll_pass``,
what Celery beat runs) drain runs that have a buffered signal and no live
holder, and how many SQL statements does it spend per run, on PostgreSQL?

Setup, in a scratch PostgreSQL database ``weft_bench_beat_pass`` of its own
(dropped at the end unless ``--keep``): one ``it.relay`` run is driven for
real until it parks on its signal "go"; its run row and history are then
copied ``--runs`` times (bulk inserts), each with a claim held by an engine
whose lease expired an hour ago, and a buffered "go" signal. The pass is then
run in-process as the task runs it (``run_store_pass``), with a batch as large
as the backlog and ``--passes`` passes of ``--batch`` runs each otherwise.
Each drain takes the claim over, replays, consumes the signal, runs the
transactional "resumed" step, parks on "finish" and releases the claim.

    python bench/beat_pass.py --runs 10000
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Scratch, base_parser, command_line, print_table, setup_django


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000, help="stranded runs (default 10000)")
    parser.add_argument(
        "--batch", type=int, default=0, help="batch size of each pass (default: all the runs)"
    )
    args = parser.parse_args()
    scratch = Scratch("beat_pass", keep=args.keep, pg_url=args.pg_url)
    try:
        url = scratch.postgres()
        scratch.migrate(url)
        setup_django(url)
        rows = measure(args.runs, args.batch or args.runs)
    finally:
        from django.db import connections

        connections.close_all()
        scratch.drop_all()
    print(f"command: {command_line()}")
    print_table(
        [
            "pass",
            "runs selected",
            "drained",
            "seconds",
            "runs drained/s",
            "statements",
            "stmts/run",
        ],
        rows,
    )


def stranded_copies(count: int) -> None:
    """One real parked ``it.relay`` run, then ``count`` copies of it, stranded."""
    from datetime import timedelta

    import weft_django as weft
    from weft_django.models import (
        Claim,
        Engine,
        EngineKind,
        WorkflowEvent,
        WorkflowRun,
        WorkflowSignal,
    )
    from weft_django.ownership.clock import db_now
    from weft_django.runtime.engine import WorkflowEngine

    engine = WorkflowEngine(kind=EngineKind.TEST).start()
    weft.start("it.relay", workflow_id="model")
    engine.claim_and_drive("model")
    run = WorkflowRun.objects.get(pk="model")
    assert run.status == "waiting", run.status
    events = list(WorkflowEvent.objects.filter(run_id="model").order_by("seq"))
    Engine.objects.filter(id=engine.engine_id).update(
        lease_expires_at=db_now() - timedelta(hours=1)
    )
    WorkflowRun.objects.filter(pk="model").delete()
    ids = [f"stranded-{index:07d}" for index in range(count)]
    for start in range(0, count, 2000):
        chunk = ids[start : start + 2000]
        copies = []
        for run_id in chunk:
            run.pk = run_id
            copies.append(
                WorkflowRun(**{f.attname: getattr(run, f.attname) for f in run._meta.fields})
            )
        WorkflowRun.objects.bulk_create(copies)
        WorkflowEvent.objects.bulk_create(
            [
                WorkflowEvent(
                    run_id=run_id,
                    seq=e.seq,
                    kind=e.kind,
                    name=e.name,
                    result=e.result,
                    error=e.error,
                    engine_id=e.engine_id,
                    epoch=e.epoch,
                )
                for run_id in chunk
                for e in events
            ]
        )
        Claim.objects.bulk_create(
            [
                Claim(workflow_id=run_id, epoch=1, holder_id=engine.engine_id, claimed_at=db_now())
                for run_id in chunk
            ]
        )
        WorkflowSignal.objects.bulk_create(
            [WorkflowSignal(run_id=run_id, signal_id="go", name="go") for run_id in chunk]
        )
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def measure(count: int, batch: int) -> list[list[object]]:
    from django.db import connection

    from weft_django.conf import PassLimits
    from weft_django.models import WorkflowRun
    from weft_django.runtime.passes.store import SIGNAL_POLL, run_store_pass

    stranded_copies(count)
    rows: list[list[object]] = []
    statements = 0

    def counter(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        nonlocal statements
        statements += 1
        return execute(sql, params, many, context)

    number = 0
    while WorkflowRun.objects.filter(waiting_on__name="go").exists():
        number += 1
        statements = 0
        began = time.monotonic()
        with connection.execute_wrapper(counter):
            summary = run_store_pass(SIGNAL_POLL, PassLimits.of(batch, 3600))
        seconds = time.monotonic() - began
        drained = summary["counts"].get("drained", 0)
        selected = sum(summary["counts"].values())
        rows.append(
            [
                number,
                selected,
                drained,
                round(seconds, 2),
                round(drained / seconds, 1),
                statements,
                round(statements / max(drained, 1), 1),
            ]
        )
        if not drained:
            break
    parked = WorkflowRun.objects.filter(waiting_on__name="finish").count()
    if parked != count:
        raise SystemExit(f"only {parked} of {count} runs reached their next park point")
    return rows


if __name__ == "__main__":
    main()
