"""Catch-up and overlap policies after an outage of ALL workers, with real
``weft_worker`` processes (docs/schedules.md, "After downtime").

The issue's scenario is a 30-s outage; this test uses schedules every second
(the ``skip`` one every 5 s) and an outage of 4 to 7.5 s, which is longer than
the takeover bound (``CLAIM_TTL + 3 x renew`` = 2.25 s here), so a missed tick
is late exactly as after 30 s: the policies behave the same, and the test stays
under ~20 s per database.

Two workers fire the schedules of ``settings_schedules`` (``WEFT_IT_SCHEDULES=
policies``); both are SIGKILLed; after the outage one worker starts again.
Then, per schedule:

* ``catch_up="skip"``: none of the outage's ticks fires (they are all older
  than the bound when the worker is back), and firing resumes;
* ``catch_up="latest"``: one tick, the most recent due when the worker is back
  (``L``), then the next ones;
* ``catch_up="all"``: every tick of the outage, once, oldest first;
  ``max_catch_up=2``: only the latest two (``L - 1`` and ``L``);
* ``overlap="skip"`` / ``"queue"`` with a run that lasts 2.5 s: no two runs of
  the schedule ever overlap (across the outage too: the run in flight when the
  workers died is taken over first); ``skip`` drops the ticks meanwhile,
  ``queue`` holds one back and fires it when the previous run ends.
"""

from __future__ import annotations

import itertools
import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from weft_django.models import WorkflowRun

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SETTINGS = "tests.integration.settings_schedules"
ENV = {
    "WEFT_IT_SCHEDULES": "policies",
    # Takeover bound (a tick's lateness tolerance) CLAIM_TTL + 3 x renew = 2.25 s.
    "WEFT_CLAIM_TTL": "1.5",
    "WEFT_CLAIM_RENEW_INTERVAL": "0.25",
}
LATE_AFTER = 2.25
OVERLAP = ("po-overlap-skip", "po-overlap-queue")
SECOND = timedelta(seconds=1)


def now() -> datetime:
    return datetime.now(UTC)


def runs(name: str) -> dict[datetime, WorkflowRun]:
    """The runs a schedule's ticks started, by tick."""
    prefix = f"schedule:{name}:"
    found = WorkflowRun.objects.filter(pk__startswith=prefix).only(
        "created_at", "finished_at", "status"
    )
    return {
        datetime.fromisoformat(run.pk[len(prefix) :].replace("Z", "+00:00")): run for run in found
    }


def ticks(name: str) -> list[datetime]:
    return sorted(runs(name))


def contiguous(found: list[datetime]) -> bool:
    return all(b - a == SECOND for a, b in itertools.pairwise(found))


def held_back(name: str) -> list[datetime]:
    """Ticks fired more than 1.4 s after their time: held by overlap="queue"."""
    return [t for t, run in runs(name).items() if (run.created_at - t).total_seconds() > 1.4]


def check_never_overlapping(name: str) -> list[datetime]:
    fired = runs(name)
    order = sorted(fired)
    for before, after in itertools.pairwise(order):
        previous = fired[before]
        assert previous.finished_at is not None, f"{name}: {before} unfinished, {after} fired"
        assert fired[after].created_at >= previous.finished_at, f"{name}: {after} overlapped"
    return order


def test_catch_up_and_overlap_after_all_workers_were_down(workers: Any, wait: Any) -> None:
    started = [workers.start(name, settings=SETTINGS, ready=False, **ENV) for name in ("a", "b")]
    for process in started:
        workers.wait_ready(process)
    # A few ticks, and a tick held back by overlap="queue" then fired.
    wait(
        lambda: len(ticks("po-latest")) >= 3 and held_back("po-overlap-queue"),
        20,
        what="ticks before the outage",
    )
    for process in started:
        process.kill()
    killed_at = now()
    # The outage: at least 4 s, and it ends 2.4 s or more after a 5-s tick of the
    # skip schedule (tau), before the next: tau and every earlier tick of the
    # outage are late when the worker is back.
    tau = datetime.fromtimestamp(math.floor(killed_at.timestamp() / 5) * 5 + 5, UTC)
    back_at = max(killed_at + timedelta(seconds=4), tau + timedelta(seconds=2.4))
    time.sleep(max((back_at - now()).total_seconds(), 0.0))
    back_at = now()
    workers.start("c", settings=SETTINGS, **ENV)
    wait(
        lambda: (
            any(t > tau for t in ticks("po-skip"))
            and len([t for t in ticks("po-latest") if t > back_at]) >= 2
            and all(ticks(name)[-1] > killed_at for name in OVERLAP)
        ),
        20,
        what="ticks after the outage",
    )
    workers.kill_all()

    def after_the_kill(name: str) -> tuple[list[datetime], list[datetime]]:
        found = ticks(name)
        return [t for t in found if t <= killed_at], [t for t in found if t > killed_at]

    # latest: one tick of the outage, the most recent due (L), then on.
    before, after = after_the_kill("po-latest")
    latest = after[0]
    assert before and latest - before[-1] >= 3 * SECOND, (before, after)
    assert latest >= back_at - SECOND
    # all, up to max_catch_up=2: L - 1 and L (the same firing pass), then on.
    before, after = after_the_kill("po-all-2")
    assert after[:2] == [latest - SECOND, latest], (latest, after)
    assert after[0] - before[-1] >= 2 * SECOND, (before, after)
    # all: every tick of the outage fired, each once: no tick missing at all.
    everything = ticks("po-all")
    assert contiguous(everything) and everything[0] < killed_at - SECOND, everything
    assert [t for t in everything if killed_at < t <= back_at], "the outage's ticks"
    # skip: no tick of the outage fired (tau was late); the next tick fired.
    fired = ticks("po-skip")
    assert not [t for t in fired if killed_at < t <= back_at], (killed_at, back_at, fired)
    assert back_at - tau >= timedelta(seconds=LATE_AFTER)
    assert [t for t in fired if t > back_at], fired
    # overlap: never two runs at a time, across the outage too.
    skipped = check_never_overlapping("po-overlap-skip")
    assert all(b - a >= 3 * SECOND for a, b in itertools.pairwise(skipped)), skipped
    queued = check_never_overlapping("po-overlap-queue")
    assert held_back("po-overlap-queue") and len(queued) >= 3, queued
