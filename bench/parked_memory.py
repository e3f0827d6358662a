"""Memory of one worker holding 10,000 / 50,000 / 100,000 parked runs.

    python bench/parked_memory.py [--steps 10000,50000,100000] [--renew 5]

PostgreSQL, one scratch database, one ``manage.py weft_worker --concurrency 4``
with the default timings (claim TTL 30 s, renew interval 5 s, tick 0.25 s).
The worker parks one ``orders.cart`` run; copies of it are made in SQL up to
each step, with their claims released (bench/_parked.py), and the worker's
reclaim scan takes and holds them. Once it holds them all, we let
``--settle`` renew intervals pass (every pass -- renew, reclaim, signal poll,
update poll -- runs over the held runs several times) and read the worker's
``VmRSS`` from ``/proc/<pid>/status`` every 0.5 s: the table shows the last
reading and the highest one. Target (issue 11): under 150 MB at 100,000.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    REPO,
    Scratch,
    Workers,
    base_parser,
    child_result,
    command_line,
    print_table,
    setup_django,
)
from _parked import clone_parked, held_by, park_template, rss_kb


def child(url: str, args) -> None:
    env = {
        "WEFT_CLAIM_TTL": str(args.ttl),
        "WEFT_CLAIM_RENEW_INTERVAL": str(args.renew),
        "WEFT_TICK_INTERVAL": "0.25",
    }
    setup_django(url, **env)
    import weft_django as weft

    workers = Workers(url)
    rows = []
    try:
        worker = workers.start("w", **env)
        workers.wait_ready(worker)
        park_template(weft)
        time.sleep(2 * args.renew)
        rows.append({"held": held_by(worker.engine_id), "last": rss_kb(worker.pid), "peak": 0})
        rows[0]["peak"] = rows[0]["last"]
        made = 0
        for step in args.steps:
            template = _template()
            clone_parked(template, "cart", made + 1, step - made)
            made = step
            deadline = time.monotonic() + 900
            peak = 0
            while held_by(worker.engine_id) < step + 1:
                peak = max(peak, rss_kb(worker.pid))
                if time.monotonic() > deadline:
                    raise SystemExit(f"the worker holds {held_by(worker.engine_id)} of {step + 1}")
                time.sleep(0.5)
            settle_until = time.monotonic() + args.settle * args.renew
            while time.monotonic() < settle_until:
                peak = max(peak, rss_kb(worker.pid))
                time.sleep(0.5)
            last = rss_kb(worker.pid)
            rows.append({"held": step + 1, "last": last, "peak": max(peak, last)})
    finally:
        workers.kill_all()
    print("RESULT " + json.dumps(rows), flush=True)


def _template() -> str:
    from weft_django.models import WorkflowRun

    return (
        WorkflowRun.objects.filter(workflow_name="orders.cart")
        .exclude(pk__startswith="cart-")
        .values_list("pk", flat=True)
        .first()
    )


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="10000,50000,100000")
    parser.add_argument("--ttl", type=float, default=30.0, help="WEFT CLAIM_TTL (s)")
    parser.add_argument("--renew", type=float, default=5.0, help="WEFT CLAIM_RENEW_INTERVAL (s)")
    parser.add_argument("--settle", type=float, default=4.0, help="renew intervals to wait")
    parser.add_argument("--child", default=None, help="(internal)")
    args = parser.parse_args()
    args.steps = [int(step) for step in str(args.steps).split(",")]
    if args.child:
        child(args.child, args)
        return

    scratch = Scratch("parked_memory", keep=args.keep, pg_url=args.pg_url)
    try:
        url = scratch.database("postgresql")
        scratch.migrate(url)
        rows = child_result(
            __file__,
            [
                url,
                f"--steps={','.join(map(str, args.steps))}",
                f"--ttl={args.ttl}",
                f"--renew={args.renew}",
                f"--settle={args.settle}",
            ],
        )
    finally:
        scratch.drop_all()

    base = rows[0]["last"]
    print(
        "\nRSS of one weft_worker --concurrency 4 holding parked orders.cart runs, PostgreSQL "
        f"(renew {args.renew:g} s; read after {args.settle:g} renew intervals holding them)"
    )
    print_table(
        ["held runs", "RSS MB (last)", "RSS MB (peak)", "KB per held run over 1 held", "target"],
        [
            (
                row["held"],
                row["last"] / 1024,
                row["peak"] / 1024,
                "-" if row["held"] <= 1 else (row["last"] - base) / (row["held"] - 1),
                "< 150 MB" if row["held"] > 99_000 else "",
            )
            for row in rows
        ],
    )
    print(f"command: cd {REPO} && {command_line()}")


if __name__ == "__main__":
    main()
