"""Takeover at scale: a worker holding 100,000 parked runs dies, then another stops.

    python bench/takeover_scale.py [--runs 100000] [--ttl 30] [--renew 5]

PostgreSQL, one scratch database, default timings (claim TTL 30 s, renew
interval 5 s, fast tick 0.25 s), workers with ``--concurrency 4``:

1. worker A parks one ``orders.cart`` run; ``--runs`` copies of it are made in
   SQL with their claims released (bench/_parked.py) and A's reclaim scan
   takes them all (**ownerless -> held**);
2. worker B starts; A gets **SIGKILL**; we poll until B holds every run;
3. worker C starts; B gets **SIGTERM** (it releases every claim); we poll
   until C holds every run;
4. 100 of the runs get their ``checkout`` signal and must complete on C.

Throughout, the engine row of the worker taking the runs over is polled
every 0.2 s for its last renewal pass (``Engine.passes``): the table shows
how long each renewal pass took and the largest gap between two renewals
(late = more than 1.5 x the renew interval). Target (issue 11): every run
held again within CLAIM_TTL + 3 x renew + 30 s of the SIGKILL, renewals
never late meanwhile.
"""

from __future__ import annotations

import itertools
import json
import signal
import sys
import time
from datetime import datetime
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


class RenewWatch:
    """The renewal passes of one engine, read from its row while we wait."""

    def __init__(self, engine_id: str, interval: float) -> None:
        self.engine_id = engine_id
        self.interval = interval
        self.passes: dict[str, float] = {}  # started_at -> seconds

    def poll(self) -> None:
        from weft_django.models import Engine

        passes = Engine.objects.filter(id=self.engine_id).values_list("passes", flat=True).first()
        renew = (passes or {}).get("renew")
        if renew and renew.get("started_at"):
            self.passes[renew["started_at"]] = float(renew["seconds"])

    def figures(self, interval: float) -> dict[str, float]:
        starts = sorted(datetime.fromisoformat(at) for at in self.passes)
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
        return {
            "renewals": len(starts),
            "max_pass_s": max(self.passes.values(), default=float("nan")),
            "max_gap_s": max(gaps, default=float("nan")),
            "late": sum(1 for gap in gaps if gap > 1.5 * interval),
        }


def wait_held(engine_id: str, count: int, watch: RenewWatch, timeout: float, since: float) -> float:
    """Seconds from ``since`` until ``engine_id`` holds ``count`` claims (polled
    every 0.2 s)."""
    began = since
    while held_by(engine_id) < count:
        watch.poll()
        if time.monotonic() - began > timeout:
            raise SystemExit(f"{engine_id} holds {held_by(engine_id)} of {count} after {timeout}s")
        time.sleep(0.2)
    took = time.monotonic() - began
    # Two more renewals after the last batch, so the table covers the whole takeover.
    settle = time.monotonic()
    while time.monotonic() - settle < 2.2 * watch.interval:
        watch.poll()
        time.sleep(0.2)
    return took


def child(url: str, args) -> None:
    env = {
        "WEFT_CLAIM_TTL": str(args.ttl),
        "WEFT_CLAIM_RENEW_INTERVAL": str(args.renew),
        "WEFT_TICK_INTERVAL": "0.25",
    }
    setup_django(url, **env)
    import weft_django as weft
    from weft_django.models import RunStatus, WorkflowRun

    bound = args.ttl + 3 * args.renew + 30
    workers = Workers(url)
    rows = []
    try:
        a = workers.start("a", **env)
        workers.wait_ready(a)
        template = park_template(weft)
        cloned = clone_parked(template, "cart", 1, args.runs)
        total = args.runs + 1
        watch = RenewWatch(a.engine_id, args.renew)
        took = wait_held(a.engine_id, total, watch, 600, time.monotonic())
        rows.append(("ownerless -> held (boot)", total, took, "-", watch, a))

        b = workers.start("b", **env)
        workers.wait_ready(b)
        watch = RenewWatch(b.engine_id, args.renew)
        killed = a.send(signal.SIGKILL)
        a.wait(10)
        took = wait_held(b.engine_id, total, watch, bound + 120, killed)
        rows.append(("SIGKILL -> held", total, took, bound, watch, b))

        c = workers.start("c", **env)
        workers.wait_ready(c)
        watch = RenewWatch(c.engine_id, args.renew)
        stopped = b.send(signal.SIGTERM)
        took = wait_held(c.engine_id, total, watch, bound + 120, stopped)
        b.wait(60)
        rows.append(("SIGTERM -> held", total, took, bound, watch, c))

        sample = [f"cart-{n:07d}" for n in range(1, args.runs + 1, max(args.runs // 100, 1))]
        sent = time.monotonic()
        for run_id in sample:
            weft.signal(run_id, "checkout")
        while WorkflowRun.objects.filter(pk__in=sample, status=RunStatus.COMPLETED).count() < len(
            sample
        ):
            if time.monotonic() - sent > 120:
                raise SystemExit("the signalled carts did not complete")
            time.sleep(0.1)
        signalled = (len(sample), time.monotonic() - sent)
        result = {
            "cloned_s": cloned,
            "rows": [
                {
                    "phase": phase,
                    "runs": runs,
                    "seconds": seconds,
                    "bound": bound_s,
                    "rss_mb": rss_kb(proc.pid) / 1024 if proc.alive else None,
                    **watch.figures(args.renew),
                }
                for phase, runs, seconds, bound_s, watch, proc in rows
            ],
            "signalled": signalled,
        }
    finally:
        workers.kill_all()
    print("RESULT " + json.dumps(result), flush=True)


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--ttl", type=float, default=30.0, help="WEFT CLAIM_TTL (s)")
    parser.add_argument("--renew", type=float, default=5.0, help="WEFT CLAIM_RENEW_INTERVAL (s)")
    parser.add_argument("--child", default=None, help="(internal)")
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return

    scratch = Scratch("takeover_scale", keep=args.keep, pg_url=args.pg_url)
    try:
        url = scratch.database("postgresql")
        scratch.migrate(url)
        data = child_result(
            __file__, [url, f"--runs={args.runs}", f"--ttl={args.ttl}", f"--renew={args.renew}"]
        )
    finally:
        scratch.drop_all()

    print(
        f"\ntakeover of {args.runs:,} parked runs of orders.cart, PostgreSQL (CLAIM_TTL="
        f"{args.ttl:g}s, CLAIM_RENEW_INTERVAL={args.renew:g}s, tick 0.25 s, --concurrency 4); "
        f"copies made in {data['cloned_s']:.1f}s"
    )
    print_table(
        [
            "phase",
            "runs",
            "all held after s",
            "bound s",
            "renewals seen",
            "max renew pass s",
            "max gap between renewals s",
            "late renewals",
            "worker RSS MB",
        ],
        [
            (
                r["phase"],
                r["runs"],
                r["seconds"],
                r["bound"],
                r["renewals"],
                r["max_pass_s"],
                r["max_gap_s"],
                r["late"],
                "-" if r["rss_mb"] is None else r["rss_mb"],
            )
            for r in data["rows"]
        ],
    )
    count, seconds = data["signalled"]
    print(f"then {count} carts got their checkout signal: all completed after {seconds:.2f}s")
    print(
        f"bound = CLAIM_TTL + 3 x renew + 30 s = {args.ttl + 3 * args.renew + 30:g} s, from the "
        "signal; a renewal is late when it starts more than 1.5 x renew after the previous one"
    )
    print(f"command: cd {REPO} && {command_line()}")


if __name__ == "__main__":
    main()
