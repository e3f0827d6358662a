"""A short chaos campaign (bench/chaos.py) in the test suite: faults injected at random
into three workers under a mixed load, then every invariant checked. The long one is
run by hand (docs/benchmarks.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def campaign(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WEFT_", "DJANGO_"))}
    env["DJANGO_DEBUG"] = "false"
    if os.environ.get("WEFT_TEST_POSTGRES_URL"):
        env["WEFT_BENCH_POSTGRES_URL"] = os.environ["WEFT_TEST_POSTGRES_URL"].rsplit("/", 1)[0]
    # Its own process group: when the campaign overruns, it and its workers are
    # killed together (a worker left behind would load every later test).
    process = subprocess.Popen(
        [sys.executable, "bench/chaos.py", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"the campaign overran 540 s:\n{(stdout + stderr)[-6000:]}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-12000:]
    return output


def violations(output: str) -> int:
    header, _rule, row = next(
        (lines[i], lines[i + 1], lines[i + 2])
        for lines in [output.splitlines()]
        for i, line in enumerate(lines)
        if line.startswith("| faults")
    )
    cells = dict(zip(header.split("|"), row.split("|"), strict=True))
    return int(cells[" violations "].strip())


@pytest.mark.postgres
@pytest.mark.timeout(560)  # the messages (20 s per update at most), then 300 s to end
def test_a_short_chaos_campaign_on_postgresql_violates_nothing(db: None) -> None:
    output = campaign(
        "--db",
        "postgresql",
        "--duration",
        "15",
        "--runs",
        "40",
        "--interval",
        "2",
        "--timeout",
        "300",
    )
    assert violations(output) == 0, output[-4000:]


@pytest.mark.timeout(560)
def test_a_short_chaos_campaign_on_sqlite_violates_nothing(db: None) -> None:
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the SQLite campaign runs in the SQLite pass (it makes its own file)")
    output = campaign(
        "--db", "sqlite", "--duration", "10", "--runs", "30", "--interval", "2", "--timeout", "300"
    )
    assert violations(output) == 0, output[-4000:]
