"""A short chaos campaign (bench/chaos.py) in the test suite: faults injected at random
into three workers under a mixed load, then every invariant checked. The long one is
run by hand (docs/benchmarks.md)."""

from __future__ import annotations

import os
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
    result = subprocess.run(
        [sys.executable, "bench/chaos.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
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
def test_a_short_chaos_campaign_on_postgresql_violates_nothing(db: None) -> None:
    output = campaign("--db", "postgresql", "--duration", "15", "--runs", "40", "--interval", "2")
    assert violations(output) == 0, output[-4000:]


def test_a_short_chaos_campaign_on_sqlite_violates_nothing(db: None) -> None:
    output = campaign("--db", "sqlite", "--duration", "10", "--runs", "30", "--interval", "2")
    assert violations(output) == 0, output[-4000:]
