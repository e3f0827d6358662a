"""The worker's schedule thread in-process: off without schedules, one firer at a
time, waits for the next tick, releases the lease when the worker stops."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from tests.schedules.test_firing import ts_tick  # noqa: F401 (registers ts.tick)
from weft_django.conf import Timing
from weft_django.models import Schedule, ScheduleLease
from weft_django.worker.schedule_thread import ScheduleLoop, schedule_loop

pytestmark = pytest.mark.django_db

TIMING = Timing(3.0, 1.0)


def test_off_without_schedules(weft_settings: Callable[..., None]) -> None:
    assert schedule_loop("e1", TIMING, threading.Event()) is None


def test_one_firer_waits_for_the_next_tick_and_releases_at_stop(
    weft_settings: Callable[..., None],
) -> None:
    weft_settings(SCHEDULES={"often": {"workflow": "ts.tick", "cron": "* * * * * *"}})
    stop = threading.Event()
    first = schedule_loop("w1", TIMING, stop)
    second = ScheduleLoop("w2", TIMING, stop)
    assert isinstance(first, ScheduleLoop)
    assert first.once() is not None and second.once() is None
    assert Schedule.objects.get().name == "often"
    assert 0 < first.wait() <= 1.0  # the next tick is at most a second away
    assert second.wait() == 1.0  # not the holder: try again in a renew interval
    stop.set()
    first()  # the loop ends at once and releases the lease
    assert ScheduleLease.objects.values_list("holder", flat=True).get() == ""


def test_a_tick_that_cannot_start_is_retried_a_renew_interval_later(
    weft_settings: Callable[..., None],
) -> None:
    weft_settings(SCHEDULES={"broken": {"workflow": "not.registered", "cron": "* * * * * *"}})
    loop = ScheduleLoop("w1", TIMING, threading.Event())
    loop.once()
    due = loop.firer.lease.now().replace(microsecond=0) - timedelta(seconds=1)
    Schedule.objects.update(next_tick=due)  # due now, and it fails
    summary = loop.once()
    assert summary is not None and summary.errors == 1
    assert loop.wait() == 1.0  # no busy loop on a tick that keeps failing


def test_weft_worker_no_schedules_opts_out() -> None:
    from weft_django.management.commands.weft_worker import Command

    parser = Command().create_parser("manage.py", "weft_worker")
    assert parser.parse_args([]).schedules is True
    assert parser.parse_args(["--no-schedules"]).schedules is False
