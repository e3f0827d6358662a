"""What a real ``weft_worker`` process logs, and its shutdown grace (docs/operations.md).

``settings_nolog`` is a project with no ``LOGGING`` setting (a fresh
``startproject``): the command adds a stderr handler of its own there. The
integration settings configure a handler for ``weft_django``: the command
leaves it alone (``--log-level`` sets the level only).
"""

from __future__ import annotations

import re
import signal
import socket
import time
from collections import Counter
from datetime import datetime

import pytest
from django.db import connection

import weft_django as weft
from tests.integration.itapp.models import StepExecution
from tests.integration.queries import (
    all_completed,
    duplicates,
    holder,
    naps,
    owner_pid,
    statuses,
)
from weft_django.models import Claim, RunStatus

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

NOLOG = "tests.integration.settings_nolog"
START = "weft worker {engine} started: host={host} pid={pid} mode=workflow-lease database={vendor}:"


def _start_line(process) -> str:
    return START.format(
        engine=process.engine_id,
        host=socket.gethostname(),
        pid=process.pid,
        vendor=connection.vendor,
    )


def _stop(process, timeout: float = 30.0) -> int:
    process.send(signal.SIGTERM)
    return process.wait(timeout)


def test_without_logging_setting_the_worker_logs_to_stderr(workers, wait):
    worker = workers.start("nolog", concurrency=2, settings=NOLOG)
    weft.start("it.fails", "boom 42", workflow_id="fail-1")
    weft.start("it.waiter", workflow_id="wait-1")
    wait(lambda: statuses(["fail-1"])[RunStatus.FAILED] == 1, 30, what="fail-1 to fail")
    wait(lambda: holder("wait-1") == worker.engine_id, 30, what="wait-1 to be held")
    wait(lambda: "run fail-1" in worker.log(), 10, what="the failure's log line")
    assert _stop(worker) == 0
    log = worker.log()
    # The start line, at INFO, with the handler's format: time, level, logger, message.
    start = [line for line in log.splitlines() if _start_line(worker) in line]
    assert len(start) == 1, log
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO weft_django\.worker: ", start[0])
    assert "concurrency=2 " in start[0]
    assert "WARNING weft_django.engine: run fail-1 (it.fails) failed: ValueError: boom 42" in log, (
        log
    )
    assert f"weft worker {worker.engine_id} stopped; released 1 claim(s): wait-1" in log, log
    assert Claim.objects.get(workflow_id="wait-1").holder_id is None


def test_log_level_warning_keeps_warnings_only(workers, wait):
    worker = workers.start("warn", settings=NOLOG, args=["--log-level", "WARNING"])
    weft.start("it.fails", "no luck", workflow_id="fail-2")
    wait(lambda: "run fail-2" in worker.log(), 30, what="the failure's log line")
    assert _stop(worker) == 0
    log = worker.log()
    assert "WARNING weft_django.engine: run fail-2 (it.fails) failed: ValueError: no luck" in log
    assert " INFO " not in log and "started:" not in log, log


def test_log_level_debug_shows_each_turn(workers, wait):
    worker = workers.start("debug", settings=NOLOG, args=["--log-level", "DEBUG"])
    weft.start("it.steps", 2, workflow_id="debug-1")
    wait(lambda: all_completed(["debug-1"]), 30, what="debug-1 to complete")
    wait(lambda: "turn of debug-1: completed" in worker.log(), 10, what="the DEBUG line")
    assert _stop(worker) == 0
    log = worker.log()
    assert "DEBUG weft_django.worker: turn of debug-1: completed" in log
    assert _start_line(worker) in log


def test_configured_logging_is_left_alone_but_log_level_applies(workers):
    quiet = workers.start("quiet", args=["--log-level", "WARNING"])
    assert _stop(quiet) == 0
    assert "started:" not in quiet.log() and " INFO " not in quiet.log(), quiet.log()
    # The project's own handler, once: the command added none beside it.
    loud = workers.start("loud")
    assert _stop(loud) == 0
    assert loud.log().count(_start_line(loud)) == 1, loud.log()


def test_takeover_is_logged_with_the_engine_and_epoch(workers, wait):
    first = workers.start("first")
    weft.start("it.steps", 4, nap_at=1, nap_s=60, workflow_id="taken-1")
    wait(lambda: naps("taken-1"), 30, what="taken-1 to start napping")
    assert owner_pid("taken-1") == first.pid
    second = workers.start("second", args=["--status-interval", "1"])
    first.send(signal.SIGKILL)
    first.wait(10)
    wait(lambda: all_completed(["taken-1"]), 60, what="taken-1 to complete on the second")
    epoch = weft.describe("taken-1").epoch
    line = f"took over run taken-1 from engine {first.engine_id} at epoch {epoch}"
    wait(lambda: line in second.log(), 10, what="the takeover's log line")
    assert re.search(r"INFO weft_django\.\w+: " + re.escape(line), second.log())
    # The status line counts it: reclaimed by the reclaim pass, taken over from an
    # expired engine (the counts are since the previous status line).
    wait(
        lambda: re.search(r"status: .* reclaimed=1 taken_over=1", second.log()),
        10,
        what="a status line counting the takeover",
    )


def _logged_at(log: str, text: str) -> float:
    """The wall-clock time of the first log line containing ``text``."""
    line = next(line for line in log.splitlines() if text in line)
    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


GRACE = 1.0
#: The exit bound of the brief: the grace, plus ~1 s for the halt and the
#: release, plus a generous margin for two shared cores.
EXIT_BOUND = GRACE + 2.5


def test_shutdown_grace_stops_turns_at_their_next_operation(workers, wait):
    stopping = workers.start("stopping", concurrency=2, args=["--shutdown-grace", f"{GRACE:g}"])
    weft.start("it.many_steps", 400, 0.02, workflow_id="grace-1")
    marks = StepExecution.objects.filter(run_id="grace-1", kind="mark")
    wait(lambda: marks.count() >= 10, 30, what="grace-1 to run some steps")

    signalled_at, signalled_wall = stopping.send(signal.SIGTERM), time.time()
    assert stopping.wait(GRACE + 20) == 0
    took = time.monotonic() - signalled_at
    log = stopping.log()
    print(f"exited {took:.2f}s after SIGTERM (grace {GRACE:g}s, bound {EXIT_BOUND:g}s)")
    stop_line = f"stopped 1 turn(s) at their next operation after the {GRACE:g}s shutdown grace"
    assert stop_line in log, log
    assert "released 1 claim(s): grace-1" in log, log
    assert "did not reach a ctx operation" not in log
    assert took <= EXIT_BOUND, log

    # The turn went on during the grace, and started no step after the stop was logged.
    times = list(marks.values_list("at", flat=True))
    assert max(times) > signalled_wall + GRACE / 2
    assert max(times) <= _logged_at(log, stop_line) + 0.001
    done_by_first = marks.count()
    assert done_by_first < 400

    # Another worker completes it; no step ran twice.
    workers.start("finisher")
    wait(lambda: all_completed(["grace-1"]), 120, what="grace-1 to complete")
    counts = Counter(marks.values_list("step", flat=True))
    assert len(counts) == 400
    assert {step: n for step, n in counts.items() if n != 1} == {}


def _idle_in_transaction() -> bool:
    """Another session of the test database sits inside an open transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND state = 'idle in transaction' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.postgres
def test_a_turn_blocked_in_a_transactional_step_leaves_the_claims_to_expire(workers, wait):
    blocked = workers.start("blocked", args=["--shutdown-grace", f"{GRACE:g}"])
    weft.start("it.txn_hold", 60, workflow_id="txn-1")
    wait(lambda: holder("txn-1") == blocked.engine_id, 30, what="txn-1 to be held")
    wait(_idle_in_transaction, 30, what="the transactional step to hold its transaction")

    signalled_at = blocked.send(signal.SIGTERM)
    assert blocked.wait(GRACE + 20) == 0
    took = time.monotonic() - signalled_at
    log = blocked.log()
    print(f"exited {took:.2f}s after SIGTERM (grace {GRACE:g}s)")
    assert "1 turn(s) did not reach a ctx operation" in log and "txn-1" in log, log
    assert "stopped without releasing its claims" in log, log
    # The release waited for the blocked step's lock at most PASS_LOCK_WAIT: the
    # grace, the halt's second, that wait, and a margin.
    assert took <= GRACE + 1 + 1 + 2.5, log
    assert holder("txn-1") == blocked.engine_id  # not released: taken over once expired

    rescuer = workers.start("rescuer")
    wait(lambda: all_completed(["txn-1"]), 60, what="txn-1 to complete on the rescuer")
    epoch = weft.describe("txn-1").epoch
    line = f"took over run txn-1 from engine {blocked.engine_id} at epoch {epoch}"
    wait(lambda: line in rescuer.log(), 10, what="the takeover's log line")
    assert duplicates(["txn-1"]) == {}
