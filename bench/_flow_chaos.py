"""The chaos campaign's flow-control mode (``python bench/chaos.py --flow``).

Four workers of eight threads serve ``flowq`` (``tests/integration/settings_flow.py``:
concurrency 3, one per concurrency key) while ``--runs`` runs of ``it.flow_work``
(two turns each, every turn holding its slot ``HOLD`` s; every other run has one
of 12 keys, the rest none: their first turns are admitted at pickup) are driven
and, for ``--duration`` seconds, one worker at a time is SIGKILLed (and
restarted) or, on PostgreSQL and MariaDB, SIGSTOPped past the takeover bound
and continued.

Each turn records its span inside its step's fenced checkpoint transaction, so
only the spans of turns whose owner still held the run count (a frozen worker
that wakes after a takeover adds none). The invariant: at no instant more than
3 spans open, nor more than 1 of one key; every run completed with exactly one
span per turn; no slot held once every run has ended.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from typing import Any

from _common import Workers, command_line, print_table

FLOW_SETTINGS = "tests.integration.settings_flow"
CONCURRENCY, WORKERS, THREADS, KEYS, TURNS, HOLD = 3, 4, 8, 12, 2, 0.2


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most ``spans`` open at one instant (an end before a start at a tie)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    open_now = peak = 0
    for _at, step in edges:
        open_now += step
        peak = max(peak, open_now)
    return peak


def flow_violations(run_ids: list[str]) -> tuple[list[str], int]:
    """The flow invariant's violations, and the most spans seen at once."""
    from tests.integration.itapp.models import FlowSpan
    from weft_django.flow.slots import slots_in_use
    from weft_django.models import RunStatus, WorkflowRun

    violations: list[str] = []
    spans = list(FlowSpan.objects.values_list("run_id", "key", "started", "ended"))
    peak = most_at_once([(s, e) for _, _, s, e in spans])
    if peak > CONCURRENCY:
        violations.append(f"{peak} turns of flowq at once (limit {CONCURRENCY})")
    for key in {k for _, k, _, _ in spans if k}:
        at_once = most_at_once([(s, e) for _, k, s, e in spans if k == key])
        if at_once > 1:
            violations.append(f"{at_once} turns of key {key} at once (limit 1)")
    per_run = Counter(run_id for run_id, _, _, _ in spans)
    statuses = dict(WorkflowRun.objects.filter(pk__in=run_ids).values_list("pk", "status"))
    for run_id in run_ids:
        if statuses.get(run_id) != RunStatus.COMPLETED:
            violations.append(f"{run_id} ended {statuses.get(run_id)!r}")
        if per_run[run_id] != TURNS:
            violations.append(f"{run_id} recorded {per_run[run_id]} spans, not {TURNS}")
    held = slots_in_use("default")
    if held:
        violations.append(f"slots still held after every run ended: {held}")
    return violations, peak


def run_flow(args: Any, url: str, timing: dict[str, str]) -> int:
    import weft_django as weft
    from tests.integration.helpers import wait_for
    from weft_django.models import TERMINAL_STATUSES, WorkflowRun

    rng = random.Random(args.seed)
    frozen_ok = args.db != "sqlite"
    env = {**timing, "settings": FLOW_SETTINGS, "WEFT_FLOW_CONCURRENCY": str(CONCURRENCY)}
    workers = Workers(url)
    slots = [workers.start(f"f{n}", concurrency=THREADS, **env) for n in range(WORKERS)]
    for process in slots:
        workers.wait_ready(process)
    # Every other run has no key: the first turns of those are admitted at
    # pickup (a batch per queue), the keyed ones by their own turns.
    keys = [f"k{n % KEYS}" if n % 2 else "" for n in range(args.runs)]
    run_ids = [
        weft.start(
            "it.flow_work",
            keys[n],
            HOLD,
            TURNS,
            frozen_ok,
            queue="flowq",
            concurrency_key=keys[n] or None,
        ).id
        for n in range(args.runs)
    ]
    faults: Counter[str] = Counter()
    began = time.monotonic()
    ttl, renew = float(timing["WEFT_CLAIM_TTL"]), float(timing["WEFT_CLAIM_RENEW_INTERVAL"])
    try:
        while time.monotonic() - began < args.duration:
            time.sleep(rng.uniform(0.5, args.interval))
            slot = rng.randrange(WORKERS)
            kind = rng.choice(["kill", "stop"] if frozen_ok else ["kill"])
            faults[kind] += 1
            if kind == "kill":
                slots[slot].send(signal.SIGKILL)
                slots[slot].wait(10)
                slots[slot] = workers.start(f"f{slot}-{faults.total()}", concurrency=THREADS, **env)
                workers.wait_ready(slots[slot])
            else:
                slots[slot].send(signal.SIGSTOP)
                time.sleep(ttl + 3 * renew + 2)
                slots[slot].send(signal.SIGCONT)

        def ended() -> bool:
            done = WorkflowRun.objects.filter(pk__in=run_ids, status__in=TERMINAL_STATUSES)
            return done.count() == len(run_ids)

        wait_for(ended, args.timeout, interval=0.5, what="every run to end")
        threading.Event().wait(1.0)  # the last turns' slot releases
        violations, peak = flow_violations(run_ids)
    finally:
        workers.kill_all()
    print_table(
        ["mode", "runs", "workers x threads", "faults", "most at once", "violations"],
        [
            [
                "flow",
                len(run_ids),
                f"{WORKERS} x {THREADS}",
                ", ".join(f"{k} {n}" for k, n in sorted(faults.items())) or "none",
                f"{peak} (limit {CONCURRENCY})",
                len(violations),
            ]
        ],
    )
    for line in violations[:20]:
        print("VIOLATION", line)
    print(f"\ncommand: {command_line()}")
    return 1 if violations else 0
