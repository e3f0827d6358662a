"""Chaos campaign: a mixed load on 3 workers while faults are injected at random.

    python bench/chaos.py [--db postgresql|sqlite] [--duration 600] [--runs 1000] [--schedules]

Three ``manage.py weft_worker`` processes (claim TTL 3 s, renew 1 s, tick 0.05 s,
``IDLE_IN_TRANSACTION_TIMEOUT`` 2 s) drive ``--runs`` runs of ``it.chaos``: two
transactional steps, an ordinary step, a durable timer, a transactional step that
holds its transaction open for a second (every fourth run, PostgreSQL only), a signal, an update,
a child workflow (itself with a transactional step) and a predicate wait. This
process sends every signal and update while, for ``--duration`` seconds, it injects
one fault at a time at random into one worker:

* ``kill``: SIGKILL, then a new worker in its place;
* ``stop``: SIGSTOP for the takeover bound + 3 s, then SIGCONT (between writes or
  anywhere);
* ``stop_in_txn``: the same, chosen while the worker sits inside a transaction
  (PostgreSQL: a backend of that worker ``idle in transaction``);
* ``terminate``: ``pg_terminate_backend`` of every connection of that worker.

SQLite (``--db sqlite``) injects ``kill`` only: a process frozen inside a write
transaction there blocks every writer, which is SQLite's documented limit.

At the end every fault is lifted, every run must reach its terminal state, and
the invariants are checked: each run completed with the result its index
determines; each transactional step's row committed exactly once; no event
written under an epoch older than an earlier event's; each update answered once
and recorded once; each signal consumed once; no claim held by a stopped engine.
The campaign also acts as the workers' process supervisor: a worker that exits
by itself (it gave up after failing to renew its lease for 2 x TTL) is started
again and counted as a self-exit. It prints the faults by kind, the self-exits,
the runs, the violations (0 or the exit status is 1), the longest takeover (a
faulted worker's last claim on an active run moved or released) and the command.

With ``--flow`` the campaign is flow control's instead (bench/_flow_chaos.py):
4 workers x 8 threads on a queue of concurrency 3 and 1 per key, the same
faults, and the invariant that no instant had more turns at once than that.

With ``--schedules`` the workers also fire a schedule every second
(``tests/integration/settings_schedules.py``: ``it.noop_steps``, catch-up
``all``), and half the faults target the worker holding the schedule lease
(SIGKILL, or on PostgreSQL SIGSTOP past the lease). At the end the schedule is
paused and one more invariant is checked: each tick from the first to the last
was started exactly once (no tick missing, none twice).
"""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Scratch,
    WorkerProcess,
    Workers,
    base_parser,
    command_line,
    print_table,
    setup_django,
    wait_for,
)
from _flow_chaos import FLOW_SETTINGS, run_flow

TTL, RENEW = 3.0, 1.0
TIMING = {
    "WEFT_CLAIM_TTL": str(TTL),
    "WEFT_CLAIM_RENEW_INTERVAL": str(RENEW),
    "WEFT_TICK_INTERVAL": "0.05",
    "WEFT_IDLE_IN_TRANSACTION_TIMEOUT": "2",
}
WORKERS = 3
SCHEDULE_SETTINGS = "tests.integration.settings_schedules"
SCHEDULE = "it-every-second"


class Campaign:
    def __init__(self, args: Any, url: str) -> None:
        self.args = args
        self.url = url
        self.postgres = args.db == "postgresql"
        self.rng = random.Random(args.seed)
        self.workers = Workers(url)
        self.slots: list[WorkerProcess] = []
        self.faults: Counter[str] = Counter()
        self.exits: Counter[int] = Counter()
        self.takeovers: list[float] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.generation = 0

    # -- workers ------------------------------------------------------------------

    def start_worker(self, slot: int) -> WorkerProcess:
        with self.lock:
            self.generation += 1
            name = f"w{slot}-{self.generation}"
        env = dict(TIMING)
        if self.args.schedules:
            env["settings"] = SCHEDULE_SETTINGS
        if self.postgres:
            env["DATABASE_APPLICATION_NAME"] = f"chaos-{name}"
        process = self.workers.start(name, concurrency=4, **env)
        self.workers.wait_ready(process)
        return process

    def backends_of(self, process: WorkerProcess, *, idle_in_txn: bool = False) -> list[int]:
        from django.db import connection

        extra = " AND state = 'idle in transaction'" if idle_in_txn else ""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                f"AND application_name = %s{extra}",
                [f"chaos-{process.name}"],
            )
            return [row[0] for row in cursor.fetchall()]

    # -- faults -------------------------------------------------------------------

    def held_active(self, engine_id: str) -> set[str]:
        from weft_django.models import ACTIVE_STATUSES, Claim, WorkflowRun

        held = set(Claim.objects.filter(holder_id=engine_id).values_list("workflow_id", flat=True))
        return set(
            WorkflowRun.objects.filter(pk__in=held, status__in=ACTIVE_STATUSES).values_list(
                "pk", flat=True
            )
        )

    def watch_takeover(self, engine_id: str, began: float, back: threading.Event) -> None:
        """Record how long until none of the faulted engine's active runs is still held
        by it: a takeover. Not recorded when the engine came back first (``back``)."""
        held = self.held_active(engine_id)
        if not held:
            return

        def watch() -> None:
            from django.db import connection

            try:
                while self.held_active(engine_id) & held:
                    if back.is_set() or self.stop.is_set():
                        return
                    time.sleep(0.05)
                took = time.monotonic() - began
                with self.lock:
                    self.takeovers.append(took)
                if took > TTL + 3 * RENEW + 3:
                    print(
                        f"slow takeover: {took:.1f}s of {len(held)} runs of {engine_id}", flush=True
                    )
            finally:
                connection.close()

        threading.Thread(target=watch, daemon=True).start()

    def inject(self) -> None:
        kinds = ["kill"]
        if self.postgres:
            kinds += ["stop", "stop_in_txn", "terminate"]
        kind = self.rng.choice(kinds)
        slot = self.rng.randrange(WORKERS)
        if self.args.schedules and self.rng.random() < 0.5:
            slot = self.firer_slot(slot)
            self.faults["at the firer"] += 1
        process = self.slots[slot]
        if kind == "stop_in_txn":
            candidates = [p for p in self.slots if self.backends_of(p, idle_in_txn=True)]
            if not candidates:
                kind = "stop"
            else:
                process = self.rng.choice(candidates)
                slot = self.slots.index(process)
        self.faults[kind] += 1
        back = threading.Event()
        if kind == "kill":
            began = process.send(signal.SIGKILL)
            self.watch_takeover(str(process.engine_id), began, back)
            process.wait(10)
            self.slots[slot] = self.start_worker(slot)
        elif kind in ("stop", "stop_in_txn"):
            # Frozen past the takeover bound, so its runs are taken over meanwhile.
            began = process.send(signal.SIGSTOP)
            self.watch_takeover(str(process.engine_id), began, back)
            self.stop.wait(TTL + 3 * RENEW + 3.0)
            back.set()
            process.send(signal.SIGCONT)
        else:
            from django.db import connection

            with connection.cursor() as cursor:
                for pid in self.backends_of(process):
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])

    def firer_slot(self, default: int) -> int:
        """The slot of the worker holding the schedule lease (``default`` if none)."""
        from weft_django.models import ScheduleLease

        holder = ScheduleLease.objects.values_list("holder", flat=True).first()
        for slot, process in enumerate(self.slots):
            if holder and process.engine_id == holder:
                return slot
        return default

    def supervise(self) -> None:
        """Act as the workers' process supervisor: one that exited is started again."""
        for slot, process in enumerate(self.slots):
            if process.alive:
                continue
            code = process.wait(10)
            self.exits[code] += 1
            last = [line for line in process.log().splitlines() if "ERROR" in line][-1:]
            print(f"{process.name} exited with status {code}: {last}", flush=True)
            self.slots[slot] = self.start_worker(slot)

    def injector(self, until: float) -> None:
        from django.db import connection

        try:
            while time.monotonic() < until and not self.stop.is_set():
                self.supervise()
                self.inject()
                self.stop.wait(self.rng.uniform(0.5, self.args.interval))
            self.supervise()
        finally:
            connection.close()

    # -- load ---------------------------------------------------------------------

    def send_messages(self, run_id: str, index: int) -> Any:
        """The run's signal and update, retried (idempotently) until they are in."""
        from django.db import connection

        import weft_django as weft

        try:
            time.sleep(self.rng.uniform(0, 3))
            while True:
                try:
                    weft.signal(run_id, "go", index, signal_id=f"{run_id}-go")
                    return weft.update(
                        run_id, "add", index + 1, update_id=f"{run_id}-add", timeout=20
                    )
                except (weft.UpdateTimeoutError, weft.StoreBusyError):
                    continue
                except weft.WorkflowTerminalError:
                    return None  # it ended without them: check() reports it
        finally:
            connection.close()

    def run(self) -> int:
        import weft_django as weft

        for slot in range(WORKERS):
            self.slots.append(self.start_worker(slot))
        run_ids = []
        for index in range(self.args.runs):
            # On SQLite a transaction held open blocks every writer: no such steps there.
            hold = 1.0 if index % 4 == 0 and self.postgres else 0.0
            run_ids.append(weft.start("it.chaos", index, hold, workflow_id=f"chaos-{index:05d}").id)
        began = time.monotonic()
        injector = threading.Thread(
            target=self.injector, args=(began + self.args.duration,), daemon=True
        )
        injector.start()
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(self.send_messages, run_ids, range(len(run_ids))))
            injector.join()
        for process in self.slots:
            if process.alive:
                process.send(signal.SIGCONT)
        from weft_django.models import TERMINAL_STATUSES, WorkflowRun

        def ended() -> bool:
            self.supervise()
            live = WorkflowRun.objects.exclude(status__in=TERMINAL_STATUSES)
            if self.args.schedules:  # ticks keep coming until the schedule is paused
                live = live.exclude(pk__startswith="schedule:")
            return not live.exists()

        wait_for(
            ended,
            self.args.timeout,
            interval=0.5,
            what="every run to end",
            on_timeout=self.unfinished,
        )
        if self.args.schedules:
            weft.pause_schedule(SCHEDULE, reason="end of the chaos campaign", by="chaos")
            self.stop.wait(2 * RENEW)  # a firing in flight commits
            wait_for(ended_ticks, self.args.timeout, interval=0.5, what="every tick's run")
        elapsed = time.monotonic() - began
        for process in self.slots:  # graceful stop: claims released, engines stopped
            process.send(signal.SIGTERM)
        for process in self.slots:
            process.wait(30)
        self.stop.set()
        violations = check(run_ids, answers, postgres=self.postgres)
        if self.args.schedules:
            violations += check_ticks()
        self.report(run_ids, violations, elapsed)
        return 1 if violations else 0

    def unfinished(self) -> str:
        """What a stalled campaign looks like: each run not ended, its claim and
        its holder's lease, and each worker's last log lines."""
        from weft_django.models import TERMINAL_STATUSES, Claim, Engine, WorkflowRun
        from weft_django.ownership.clock import db_now

        now = db_now()
        leases = dict(Engine.objects.values_list("id", "lease_expires_at"))
        claims = {c.workflow_id: c for c in Claim.objects.all()}
        lines = [f"database now {now.isoformat()}"]
        for run in WorkflowRun.objects.exclude(status__in=TERMINAL_STATUSES).order_by("id"):
            claim = claims.get(run.pk)
            holder = claim.holder_id if claim else None
            lease = leases.get(holder) if holder else None
            lines.append(
                f"{run.pk} {run.status} waiting_on={run.waiting_on} wake_at={run.wake_at} "
                f"hint={run.wake_hint_at} claim={'-' if claim is None else claim.epoch} "
                f"holder={holder} lease_left="
                f"{'-' if lease is None else round((lease - now).total_seconds(), 1)}"
            )
        for process in self.slots:
            lines.append(f"--- {process.name} alive={process.alive}\n{process.tail(15)}")
        return "\n".join(lines)

    def report(self, run_ids: list[str], violations: list[str], elapsed: float) -> None:
        print(
            f"\nchaos campaign: {WORKERS} workers on {self.args.db}, {len(run_ids)} runs of "
            f"it.chaos (+ a child each), faults for {self.args.duration:g} s "
            f"(CLAIM_TTL {TTL:g} s, renew {RENEW:g} s, bound {TTL + 3 * RENEW:g} s)"
        )
        kinds = ["kill", "stop", "stop_in_txn", "terminate"]
        print_table(
            [
                "faults",
                *kinds,
                "self-exits",
                "runs",
                "violations",
                "longest takeover (s)",
                "wall (s)",
            ],
            [
                [
                    sum(self.faults[kind] for kind in kinds),
                    *(self.faults[kind] for kind in kinds),
                    sum(self.exits.values()),
                    len(run_ids) * 2,
                    len(violations),
                    max(self.takeovers, default=0.0),
                    elapsed,
                ]
            ],
        )
        if self.args.schedules:
            from weft_django.models import WorkflowRun

            ticks = WorkflowRun.objects.filter(pk__startswith=f"schedule:{SCHEDULE}:").count()
            print(
                f"schedule {SCHEDULE}: {ticks} ticks started (one per second, each once); "
                f"{self.faults['at the firer']} faults aimed at the schedule lease's holder"
            )
        for violation in violations[:200]:
            print(f"VIOLATION: {violation}")
        print(f"command: {command_line()}")


def ended_ticks() -> bool:
    from weft_django.models import TERMINAL_STATUSES, WorkflowRun

    ticks = WorkflowRun.objects.filter(pk__startswith="schedule:")
    return not ticks.exclude(status__in=TERMINAL_STATUSES).exists()


def check_ticks() -> list[str]:
    """Each tick of the schedule, from the first to the last, started exactly once
    (run ids are unique, so "twice" would show as a run that is not a tick)."""
    from datetime import datetime, timedelta

    from weft_django.models import RunStatus, WorkflowRun

    prefix = f"schedule:{SCHEDULE}:"
    rows = WorkflowRun.objects.filter(pk__startswith=prefix).values_list("pk", "status")
    ticks = sorted(
        datetime.fromisoformat(pk[len(prefix) :].replace("Z", "+00:00")) for pk, _ in rows
    )
    if not ticks:
        return [f"schedule {SCHEDULE}: no tick was started"]
    violations = [f"{pk} ended {status}" for pk, status in rows if status != RunStatus.COMPLETED]
    seconds = int((ticks[-1] - ticks[0]).total_seconds())
    expected = {ticks[0] + timedelta(seconds=n) for n in range(seconds + 1)}
    missing = sorted(expected - set(ticks))
    violations += [
        f"schedule {SCHEDULE}: tick {tick.isoformat()} never started" for tick in missing
    ]
    extra = [tick for tick in ticks if tick not in expected or tick.microsecond]
    violations += [f"schedule {SCHEDULE}: run {tick.isoformat()} is not a tick" for tick in extra]
    return violations


def check(run_ids: list[str], answers: list[Any], *, postgres: bool) -> list[str]:
    """Every invariant of the campaign; returns the violations found."""
    from collections import defaultdict

    from tests.integration.itapp.models import StepExecution
    from weft_django.models import (
        Claim,
        EngineStatus,
        RunStatus,
        UpdateRequest,
        UpdateStatus,
        WorkflowEvent,
        WorkflowRun,
        WorkflowSignal,
    )

    violations: list[str] = []
    runs = {row[0]: row[1:] for row in WorkflowRun.objects.values_list("pk", "status", "result")}
    rows: dict[tuple[str, str], int] = Counter(
        StepExecution.objects.filter(kind="step").values_list("run_id", "step")
    )
    for index, run_id in enumerate(run_ids):
        child_id = f"{run_id}/child"
        expected = {"index": index, "signal": index, "child": 2 * index, "total": index + 1}
        if runs.get(run_id) != (RunStatus.COMPLETED, expected):
            error = WorkflowRun.objects.filter(pk=run_id).values_list("error", flat=True).first()
            violations.append(f"{run_id} ended {runs.get(run_id)!r} ({error}), expected {expected}")
        if runs.get(child_id) != (RunStatus.COMPLETED, 2 * index):
            violations.append(f"{child_id} ended {runs.get(child_id)!r}")
        steps = ["t1", "t2"] + (["hold"] if index % 4 == 0 and postgres else [])
        for step in steps:
            if rows[(run_id, step)] != 1:
                violations.append(f"{run_id} step {step} committed {rows[(run_id, step)]} times")
        if rows[(child_id, "c1")] != 1:
            violations.append(f"{child_id} step c1 committed {rows[(child_id, 'c1')]} times")
        if answers[index] != index + 1:
            violations.append(f"{run_id}: update answered {answers[index]!r}, not {index + 1}")
    epochs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    kinds: dict[tuple[str, str], int] = Counter()
    for run_id, seq, epoch, kind in WorkflowEvent.objects.values_list(
        "run_id", "seq", "epoch", "kind"
    ).order_by("run_id", "seq"):
        epochs[run_id].append((seq, epoch))
        kinds[(run_id, kind)] += 1
    for run_id, events in epochs.items():
        for (seq, epoch), (_prev_seq, previous) in zip(events[1:], events, strict=False):
            if epoch < previous:
                violations.append(f"{run_id} event #{seq} written at stale epoch {epoch}")
    for run_id in run_ids:
        for kind in ("update", "signal"):
            if kinds[(run_id, kind)] != 1:
                violations.append(f"{run_id} has {kinds[(run_id, kind)]} {kind} events")
    # One request per run, applied (answered requests are purged after the response TTL,
    # so a long campaign finds some gone: the history's one "update" event stands).
    requests: dict[str, list[str]] = defaultdict(list)
    for run_id, status in UpdateRequest.objects.values_list("run_id", "status"):
        requests[run_id].append(status)
    for run_id in run_ids:
        if requests[run_id] not in ([], [UpdateStatus.APPLIED]):
            violations.append(f"{run_id}: update requests {requests[run_id]}")
    unconsumed = WorkflowSignal.objects.filter(consumed_at__isnull=True).count()
    if unconsumed:
        violations.append(f"{unconsumed} signals never consumed")
    stale = Claim.objects.filter(holder__status=EngineStatus.STOPPED).count()
    if stale:
        violations.append(f"{stale} claims held by stopped engines")
    return violations


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["postgresql", "mysql", "sqlite"], default="postgresql")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=4.0, help="most seconds between faults")
    parser.add_argument("--timeout", type=float, default=600.0, help="for every run to end")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--schedules",
        action="store_true",
        help="also fire a schedule every second; check each tick started exactly once",
    )
    parser.add_argument(
        "--flow",
        action="store_true",
        help="flow control: a limited queue under faults; check no instant exceeded its limits",
    )
    args = parser.parse_args()
    scratch = Scratch(f"chaos_{args.db}", keep=args.keep, pg_url=args.pg_url)
    url = scratch.database(args.db)
    campaign = None
    try:
        scratch.migrate(url)
        if args.flow:
            setup_django(url, **TIMING, settings=FLOW_SETTINGS, WEFT_FLOW_CONCURRENCY="3")
            return run_flow(args, url, TIMING)
        setup_django(url, **TIMING, **({"settings": SCHEDULE_SETTINGS} if args.schedules else {}))
        campaign = Campaign(args, url)
        return campaign.run()
    finally:
        if campaign is not None:
            campaign.stop.set()
            campaign.workers.kill_all()
        from django.db import connections

        connections.close_all()
        scratch.drop_all()


if __name__ == "__main__":
    sys.exit(main())
