"""Takeover after ``kill -9`` of a run's owner: SIGKILL -> another worker resumes it.

    python bench/takeover.py [--trials 20] [--db postgresql,sqlite,mysql] [--ttl 3] [--renew 1]

Two ``manage.py weft_worker`` processes share a scratch database. Each trial
starts a run of ``it.steps`` whose second step naps (60 s on its first
attempt, logging its start); the napping process is the owner (checked
against ``weft.describe(id).owner_engine_id``). It gets SIGKILL; we poll the
claim row every 10 ms until the other worker holds it (**takeover**), and
read when the nap step started again on the other worker (**resume**, the
step records ``time.time()``). Then the dead worker is replaced and the next
trial runs. The bound (docs/benchmarks.md) is CLAIM_TTL + 2 x CLAIM_RENEW_INTERVAL
+ CLAIM_RENEW_INTERVAL: the owner's lease ends at most TTL after the kill,
it counts as expired 2 x renew later, and the next reclaim scan comes at
most one renew interval after that. Short timings are used so 20 trials take
minutes, not half an hour; ``--ttl``/``--renew`` change them.
"""

from __future__ import annotations

import json
import signal
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
    summary,
    wait_for,
)


def child(url: str, args) -> None:
    env = {
        "WEFT_CLAIM_TTL": str(args.ttl),
        "WEFT_CLAIM_RENEW_INTERVAL": str(args.renew),
        "WEFT_TICK_INTERVAL": "0.05",
    }
    setup_django(url, **env)
    import weft_django as weft
    from tests.integration.itapp.models import StepExecution
    from weft_django.models import Claim, Engine, RunStatus, WorkflowRun

    workers = Workers(url)
    live = []
    try:
        for index in range(2):
            process = workers.start(f"w{index}", **env)
            workers.wait_ready(process)
            live.append(process)
        trials = []
        for trial in range(args.trials):
            run_id = f"takeover-{trial:02d}"
            weft.start("it.steps", 3, nap_at=1, nap_s=60, workflow_id=run_id)
            naps = StepExecution.objects.filter(run_id=run_id, kind="nap")
            first = wait_for(lambda naps=naps: naps.values_list("pid", flat=True).first(), 30)
            owner_engine = weft.describe(run_id).owner_engine_id
            owner = next(p for p in live if p.pid == first)
            assert owner.engine_id == owner_engine, "the napping process holds the claim"
            other = next(p for p in live if p is not owner)
            killed_at = time.time()
            owner.send(signal.SIGKILL)
            owner.wait(10)
            # Its last renewal (the database's clock; one machine, so one clock).
            last_renewal = Engine.objects.get(id=owner_engine).heartbeat_at.timestamp()

            def moved(run_id: str = run_id, other=other) -> float | None:
                holder = (
                    Claim.objects.filter(workflow_id=run_id)
                    .values_list("holder_id", flat=True)
                    .first()
                )
                return time.time() if holder == other.engine_id else None

            taken_at = wait_for(moved, 120, interval=0.01, what="the takeover")
            resumed_at = wait_for(
                lambda naps=naps, other=other: (
                    naps.filter(pid=other.pid).values_list("at", flat=True).first()
                ),
                60,
                interval=0.01,
            )
            wait_for(
                lambda run_id=run_id: WorkflowRun.objects.filter(
                    pk=run_id, status=RunStatus.COMPLETED
                ).exists(),
                60,
            )
            steps = list(
                StepExecution.objects.filter(run_id=run_id, kind="step").values_list(
                    "step", flat=True
                )
            )
            assert sorted(steps) == ["s0", "s1", "s2"], steps  # each committed step once
            trials.append(
                {
                    "takeover": taken_at - killed_at,
                    "resume": resumed_at - killed_at,
                    "renewed_before_kill": killed_at - last_renewal,
                }
            )
            # Replace the dead worker before the next trial.
            live.remove(owner)
            replacement = workers.start(f"w{len(workers.started)}", **env)
            workers.wait_ready(replacement)
            live.append(replacement)
    finally:
        workers.kill_all()
    print("RESULT " + json.dumps(trials), flush=True)


def main() -> None:
    import argparse

    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--db", default="postgresql,sqlite")
    parser.add_argument("--ttl", type=float, default=3.0, help="WEFT CLAIM_TTL (s)")
    parser.add_argument("--renew", type=float, default=1.0, help="WEFT CLAIM_RENEW_INTERVAL (s)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return

    bound = args.ttl + 3 * args.renew
    scratch = Scratch("takeover", keep=args.keep, pg_url=args.pg_url, mysql_url=args.mysql_url)
    rows, per_trial = [], []
    try:
        for db in args.db.split(","):
            url = scratch.database(db)
            scratch.migrate(url)
            trials = child_result(
                __file__,
                [url, f"--trials={args.trials}", f"--ttl={args.ttl}", f"--renew={args.renew}"],
                what=f"{db} trials",
            )
            for name in ("takeover", "resume"):
                values = [t[name] for t in trials]
                stats = summary(values)
                within = sum(1 for v in values if v < bound)
                rows.append(
                    (
                        db,
                        name,
                        stats["n"],
                        stats["min"],
                        stats["p50"],
                        stats["p90"],
                        stats["max"],
                        bound,
                        f"{within}/{len(values)}",
                    )
                )
            per_trial.append((db, trials))
    finally:
        scratch.drop_all()

    print(
        f"\ntakeover after SIGKILL of the owner, seconds (CLAIM_TTL={args.ttl:g}s, "
        f"CLAIM_RENEW_INTERVAL={args.renew:g}s, tick 0.05 s, 2 workers)"
    )
    print_table(
        ["database", "SIGKILL ->", "n", "min", "p50", "p90", "max", "bound", "under bound"], rows
    )
    for db, trials in per_trial:
        print(
            f"{db} per trial, takeover s (last renewal s before the kill): "
            + ", ".join(f"{t['takeover']:.2f} ({t['renewed_before_kill']:.2f})" for t in trials)
        )
    print(
        f"bound = CLAIM_TTL + 2 x renew + renew = {args.ttl:g} + {2 * args.renew:g} + "
        f"{args.renew:g} = {bound:g} s; takeover = the other worker holds the claim, "
        "resume = the interrupted step starts again on it"
    )
    print(f"command: cd {REPO} && {command_line()}")


if __name__ == "__main__":
    main()
