"""Real ``weft_worker`` processes fire a schedule every second: each tick is
started exactly once while the firing worker is SIGKILLed (the next one takes
the schedule lease over within CLAIM_TTL + 3 x renew and, with catch_up="all",
fires the ticks of the gap). The 60-s, 3-worker version with a SIGSTOP past the
lease is the chaos campaign's schedules mode (bench/chaos.py --schedules)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from weft_django.models import ScheduleLease, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS = "tests.integration.settings_schedules"
PREFIX = "schedule:it-every-second:"
# Takeover bound CLAIM_TTL + 3 x renew = 1.5 + 0.75 s.
TIMING = {"WEFT_CLAIM_TTL": "1.5", "WEFT_CLAIM_RENEW_INTERVAL": "0.25"}


def ticks() -> list[datetime]:
    ids = WorkflowRun.objects.filter(pk__startswith=PREFIX).values_list("pk", flat=True)
    return sorted(
        datetime.fromisoformat(run_id[len(PREFIX) :].replace("Z", "+00:00")) for run_id in ids
    )


def holder() -> str:
    return ScheduleLease.objects.values_list("holder", flat=True).first() or ""


def check_each_tick_once(found: list[datetime]) -> None:
    assert len(found) == len(set(found))
    expected = [found[0] + timedelta(seconds=i) for i in range(len(found))]
    missing = sorted(set(expected) - set(found))
    assert found == expected, f"ticks missing: {missing}"


def test_each_tick_started_once_across_a_sigkilled_firer(workers: Any, wait: Any) -> None:
    started = [
        workers.start(name, settings=SETTINGS, concurrency=2, **TIMING) for name in ("a", "b")
    ]
    wait(lambda: len(ticks()) >= 2 and holder(), 20, what="the first ticks")
    firer = workers.by_engine(holder())
    firer.kill()
    killed_at = len(ticks())
    survivor = next(p for p in started if p is not firer)
    wait(lambda: holder() == survivor.engine_id, 10, what="the takeover of the schedule lease")
    wait(lambda: len(ticks()) >= killed_at + 3, 10, what="ticks after the takeover")
    check_each_tick_once(ticks())
