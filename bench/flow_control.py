"""Flow control (docs/flow-control.md): its throughput cost, a rate held, priority.

    python bench/flow_control.py [--runs 2000] [--rounds 3] [--steps 3] [--workers 2]
                                 [--concurrency 4]
                                 [--rate 20] [--rate-runs 2000] [--rate-window 30]
                                 [--backlog 5000] [--db postgresql]

On one scratch database, with ``tests/integration/settings_flow.py`` (queue
``flowq``), four phases, each with fresh worker processes:

1. **none**: ``--runs`` runs of ``it.many_steps`` (``--steps`` steps of
   ``--step-ms`` each: an API call's worth of work; 0 for pure overhead) on
   the ``default`` queue (no limits); runs/s from the first ``started_at`` to
   the last ``finished_at``;
2. **limited**: the same on ``flowq`` with a concurrency limit and a rate,
   neither binding (64 slots for 8 threads, 100,000/s): the cost of taking
   and freeing a slot and a token every turn. Target: under 10 % fewer runs/s
   than *none*. Then **keyed**: also a per-key limit of 1 over 50 keys, which
   does bind at times (two runs of one key due together: one waits);
3. **rate**: ``--rate-runs`` one-step runs on ``flowq`` limited to ``--rate``
   turns a second (burst 1): the turns started per second over the
   ``--rate-window`` seconds after the first one. Target: within 10 %;
4. **priority**: a backlog of ``--backlog`` one-step runs of priority 0 being
   worked; one run of priority 100 started a second in: how long until its
   turn started, and how many backlog runs started after it was stored and
   before it. Target: within one tick (``WEFT_TICK_INTERVAL``, 0.1 s here).
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    DATABASES,
    Scratch,
    Workers,
    base_parser,
    command_line,
    print_table,
    setup_django,
    wait_for,
)

FLOW_SETTINGS = "tests.integration.settings_flow"
TICK = "0.1"


def clear() -> None:
    from tests.integration.itapp.models import FlowSpan
    from weft_django.models import Claim, QueueRate, QueueSlot, WorkflowRun

    for model in (WorkflowRun, Claim, QueueSlot, QueueRate, FlowSpan):
        model.objects.all().delete()


def drive(args: Any, url: str, ids: list[str], env: dict[str, str]) -> None:
    from weft_django.models import RunStatus, WorkflowRun

    workers = Workers(url)
    env = {"settings": FLOW_SETTINGS, "WEFT_TICK_INTERVAL": TICK, **env}
    try:
        for n in range(args.workers):
            workers.wait_ready(workers.start(f"w{n}", concurrency=args.concurrency, **env))
        done = WorkflowRun.objects.filter(pk__in=ids, status=RunStatus.COMPLETED)
        wait_for(lambda: done.count() == len(ids), args.timeout, interval=0.2, what="the runs")
    finally:
        workers.kill_all()


def window(ids: list[str]) -> float:
    from django.db.models import Max, Min

    from weft_django.models import WorkflowRun

    span = WorkflowRun.objects.filter(pk__in=ids).aggregate(
        first=Min("started_at"), last=Max("finished_at")
    )
    return (span["last"] - span["first"]).total_seconds()


def throughput(args: Any, url: str, mode: str) -> float:
    """Runs/s of ``--runs`` runs: ``none`` (queue default), ``limited`` (flowq:
    a concurrency limit and a rate, neither binding) or ``keyed`` (flowq, a key
    of 50 per run as well: one run per key at a time)."""
    import weft_django as weft

    clear()
    options: dict[str, Any] = {} if mode == "none" else {"queue": "flowq"}
    keys = [{"concurrency_key": f"c{n % 50}"} if mode == "keyed" else {} for n in range(args.runs)]
    seconds = args.step_ms / 1000.0
    ids = [
        weft.start("it.many_steps", args.steps, seconds, **options, **keys[n]).id
        for n in range(args.runs)
    ]
    env = {} if mode == "none" else {"WEFT_FLOW_CONCURRENCY": "64", "WEFT_FLOW_RATE": "100000"}
    drive(args, url, ids, env)
    return len(ids) / window(ids)


def rate_held(args: Any, url: str) -> tuple[float, int]:
    import weft_django as weft
    from weft_django.models import WorkflowRun

    clear()
    ids = [weft.start("it.noop_steps", 1, queue="flowq").id for _ in range(args.rate_runs)]
    workers = Workers(url)
    env = {
        "settings": FLOW_SETTINGS,
        "WEFT_TICK_INTERVAL": TICK,
        "WEFT_FLOW_CONCURRENCY": "64",
        "WEFT_FLOW_RATE": str(args.rate),
    }
    try:
        for n in range(args.workers):
            workers.wait_ready(workers.start(f"r{n}", concurrency=args.concurrency, **env))
        started = WorkflowRun.objects.filter(pk__in=ids, started_at__isnull=False)
        wait_for(started.exists, 60, interval=0.1, what="the first turn")
        first = started.order_by("started_at").values_list("started_at", flat=True).first()
        time.sleep(args.rate_window + 1.0)
    finally:
        workers.kill_all()
    end = first + timedelta(seconds=args.rate_window)
    count = WorkflowRun.objects.filter(
        pk__in=ids, started_at__gte=first, started_at__lt=end
    ).count()
    return count / args.rate_window, count


def priority(args: Any, url: str) -> tuple[float, int]:
    import weft_django as weft
    from weft_django.models import WorkflowRun

    clear()
    backlog = [weft.start("it.noop_steps", 1).id for _ in range(args.backlog)]
    workers = Workers(url)
    env = {"settings": FLOW_SETTINGS, "WEFT_TICK_INTERVAL": TICK}
    try:
        for n in range(args.workers):
            workers.wait_ready(workers.start(f"p{n}", concurrency=args.concurrency, **env))
        time.sleep(1.0)
        urgent = weft.start("it.noop_steps", 1, priority=100).id
        row = WorkflowRun.objects.filter(pk=urgent)
        wait_for(
            lambda: row.filter(started_at__isnull=False).exists(),
            30,
            interval=0.01,
            what="the urgent run",
        )
    finally:
        workers.kill_all()
    created, started = row.values_list("created_at", "started_at").get()
    ahead = WorkflowRun.objects.filter(
        pk__in=backlog, started_at__gt=created, started_at__lt=started
    ).count()
    return (started - created).total_seconds(), ahead


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the modes")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--step-ms", type=float, default=10.0, help="work per step (ms)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--rate-runs", type=int, default=2000)
    parser.add_argument("--rate-window", type=float, default=30.0)
    parser.add_argument("--backlog", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--db", default="postgresql", choices=list(DATABASES))
    args = parser.parse_args()
    scratch = Scratch("flow", keep=args.keep, pg_url=args.pg_url, mysql_url=args.mysql_url)
    try:
        url = scratch.database(args.db)
        scratch.migrate(url)
        setup_django(url, settings=FLOW_SETTINGS, WEFT_TICK_INTERVAL=TICK)
        # Rounds interleave the three modes, every other round in reverse order,
        # so a swing of the shared machine lands on all of them; the table shows
        # each mode's median.
        modes = ("none", "limited", "keyed")
        rounds = [
            {mode: throughput(args, url, mode) for mode in modes[:: 1 if n % 2 == 0 else -1]}
            for n in range(args.rounds)
        ]
        none, limited, keyed = (
            statistics.median(r[mode] for r in rounds) for mode in ("none", "limited", "keyed")
        )
        costs = sorted(100.0 * (r["none"] - r["limited"]) / r["none"] for r in rounds)
        per_second, counted = rate_held(args, url)
        latency, ahead = priority(args, url)
    finally:
        from django.db import connections

        connections.close_all()
        scratch.drop_all()
    cost = 100.0 * (none - limited) / none
    print_table(
        ["measure", "value", "target"],
        [
            [f"runs/s, no limits (median of {args.rounds})", f"{none:.0f}", ""],
            ["runs/s, limited queue (concurrency 64, 100,000/s)", f"{limited:.0f}", ""],
            [
                "throughput cost of the limits (medians; per round)",
                f"{cost:.1f} % ({', '.join(f'{c:.1f}' for c in costs)})",
                "< 10 %",
            ],
            [
                "runs/s, and one run per key at a time (50 keys)",
                f"{keyed:.0f} ({100.0 * (none - keyed) / none:.1f} % fewer)",
                "",
            ],
            [
                f"turns/s at rate {args.rate:g}/s over {args.rate_window:g} s",
                f"{per_second:.2f} ({counted} turns)",
                f"{args.rate * 0.9:g} to {args.rate * 1.1:g}",
            ],
            [
                f"priority 100 run's start behind {args.backlog} runs",
                f"{latency * 1000:.0f} ms ({ahead} backlog runs started before it)",
                f"<= one tick ({float(TICK) * 1000:.0f} ms)",
            ],
        ],
    )
    print(
        f"\n{DATABASES[args.db]}, {args.workers} workers x {args.concurrency} threads, "
        f"{args.steps} steps of {args.step_ms:g} ms per run"
    )
    print(f"command: {command_line()}")


if __name__ == "__main__":
    main()
