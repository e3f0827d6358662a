"""The firing pass in-process, on a test clock: exactly once per tick, duplicates
and zombies refused, catch-up and overlap after an outage, pause and resume."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import weft_django as weft
from tests.conftest import FakeClock
from weft_django import Context
from weft_django.conf import Timing
from weft_django.models import RunStatus, Schedule, ScheduleLease, WorkflowRun
from weft_django.schedules.declare import ScheduleSpec
from weft_django.schedules.firing import Firer

pytestmark = pytest.mark.django_db

TIMING = Timing(30.0, 5.0)  # the takeover bound (a tick's lateness tolerance) is 45 s
T0 = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)


@weft.workflow(name="ts.tick")
def ts_tick(ctx: Context, label: str = "") -> str:
    return label


def spec(name: str = "every-minute", cron: str = "* * * * *", **more: Any) -> ScheduleSpec:
    return ScheduleSpec(name=name, workflow="ts.tick", cron=cron, **more)


def firer(clock: FakeClock, *specs: ScheduleSpec, engine: str = "e1") -> Firer:
    return Firer(engine, TIMING, clock=clock, specs=lambda: {s.name: s for s in specs})


def at(clock: FakeClock, text: str) -> datetime:
    moment = datetime.fromisoformat(text).replace(tzinfo=UTC)
    clock.set(moment)
    return moment


def run_ids(name: str = "every-minute") -> list[str]:
    return sorted(
        WorkflowRun.objects.filter(pk__startswith=f"schedule:{name}:").values_list("pk", flat=True)
    )


@pytest.fixture
def tclock() -> FakeClock:
    return FakeClock(T0)


def test_each_tick_starts_one_run_with_the_contract_id(
    tclock: FakeClock, metric: Callable[..., float]
) -> None:
    fired = metric("weft_schedule_ticks_fired_total", schedule="every-minute")
    f = firer(tclock, spec(args=("a",)))
    assert f.once().started == []  # synced: the first tick is the next minute
    assert Schedule.objects.get().next_tick == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    at(tclock, "2026-01-01T00:01:00.300")
    assert f.once().started == ["schedule:every-minute:2026-01-01T00:01:00Z"]
    assert f.once().started == []  # the same tick again: nothing
    at(tclock, "2026-01-01T00:02:01")
    assert f.once().started == ["schedule:every-minute:2026-01-01T00:02:00Z"]
    row = Schedule.objects.get()
    assert row.last_run_id == "schedule:every-minute:2026-01-01T00:02:00Z"
    assert row.next_tick == datetime(2026, 1, 1, 0, 3, tzinfo=UTC)
    run = WorkflowRun.objects.get(pk=row.last_run_id)
    assert (run.workflow_name, run.args) == ("ts.tick", ["a"])
    assert metric("weft_schedule_ticks_fired_total", schedule="every-minute") - fired == 2


def test_a_second_firing_of_a_tick_is_a_refused_duplicate(tclock: FakeClock) -> None:
    f = firer(tclock, spec())
    f.once()
    weft.start("ts.tick", workflow_id="schedule:every-minute:2026-01-01T00:01:00Z")
    at(tclock, "2026-01-01T00:01:00.5")
    summary = f.once()
    assert summary.started == [] and summary.duplicates == [
        "schedule:every-minute:2026-01-01T00:01:00Z"
    ]
    assert run_ids() == ["schedule:every-minute:2026-01-01T00:01:00Z"]
    assert Schedule.objects.get().next_tick == datetime(2026, 1, 1, 0, 2, tzinfo=UTC)


def test_one_firer_at_a_time_and_a_zombie_firing_is_refused(tclock: FakeClock) -> None:
    a, b = firer(tclock, spec(), engine="a"), firer(tclock, spec(), engine="b")
    assert a.once() is not None
    assert b.once() is None  # a holds the lease
    # a freezes right after its renewal (it believes it still holds the lease) ...
    a.lease.try_acquire = lambda: True  # type: ignore[method-assign]
    at(tclock, "2026-01-01T00:02:00")  # ... past CLAIM_TTL + 2 x renew: b takes over
    assert b.lease.try_acquire()
    # The zombie wakes up and fires: the fence in its transaction refuses it.
    assert a.once().lease_lost
    assert run_ids() == []
    assert ScheduleLease.objects.values_list("holder", "token").get() == ("b", 2)
    assert b.once().started == ["schedule:every-minute:2026-01-01T00:02:00Z"]
    # b caught up the tick of a's freeze only by policy (latest): 00:01 was missed.
    assert run_ids() == ["schedule:every-minute:2026-01-01T00:02:00Z"]


def outage(tclock: FakeClock, **policy: Any) -> tuple[Firer, list[str]]:
    f = firer(tclock, spec(**policy))
    f.once()
    at(tclock, "2026-01-01T00:01:00")
    f.once()  # 00:01 fired, then no firer for 10 minutes and 50 seconds
    at(tclock, "2026-01-01T00:11:50")
    started = f.once().started
    return f, started


def test_catch_up_skip_drops_the_missed_ticks(tclock: FakeClock) -> None:
    _, started = outage(tclock, catch_up="skip")
    assert started == []  # 00:11 is 50 s late: past the 45-s takeover bound
    assert Schedule.objects.get().next_tick == datetime(2026, 1, 1, 0, 12, tzinfo=UTC)


def test_catch_up_skip_still_fires_a_tick_late_by_a_takeover(tclock: FakeClock) -> None:
    f = firer(tclock, spec(catch_up="skip"))
    f.once()
    at(tclock, "2026-01-01T00:01:40")  # 40 s late: within the takeover bound
    assert f.once().started == ["schedule:every-minute:2026-01-01T00:01:00Z"]


def test_catch_up_latest_fires_the_most_recent_missed_tick(tclock: FakeClock) -> None:
    _, started = outage(tclock, catch_up="latest")
    assert started == ["schedule:every-minute:2026-01-01T00:11:00Z"]


def test_catch_up_all_fires_every_missed_tick_up_to_the_bound(
    tclock: FakeClock, metric: Callable[..., float]
) -> None:
    skipped = metric(
        "weft_schedule_ticks_skipped_total", schedule="every-minute", reason="catch_up"
    )
    _, started = outage(tclock, catch_up="all", max_catch_up=4)
    assert started == [f"schedule:every-minute:2026-01-01T00:{m:02d}:00Z" for m in range(8, 12)]
    after = metric("weft_schedule_ticks_skipped_total", schedule="every-minute", reason="catch_up")
    assert after - skipped == 6  # 00:02 to 00:07
    assert Schedule.objects.get().next_tick == datetime(2026, 1, 1, 0, 12, tzinfo=UTC)


def test_overlap_skip_and_allow(tclock: FakeClock) -> None:
    skip, allow = spec("skip", overlap="skip"), spec("allow", overlap="allow")
    f = firer(tclock, skip, allow)
    f.once()
    for minute in (1, 2, 3):
        at(tclock, f"2026-01-01T00:0{minute}:00")
        f.once()
    assert len(run_ids("allow")) == 3
    assert run_ids("skip") == ["schedule:skip:2026-01-01T00:01:00Z"]  # it never finished
    WorkflowRun.objects.filter(pk__startswith="schedule:skip:").update(status=RunStatus.COMPLETED)
    at(tclock, "2026-01-01T00:04:00")
    f.once()
    assert run_ids("skip")[-1] == "schedule:skip:2026-01-01T00:04:00Z"


def test_overlap_queue_fires_one_held_tick_when_the_previous_run_ends(tclock: FakeClock) -> None:
    f = firer(tclock, spec("queue", overlap="queue"))
    f.once()
    for minute in (1, 2, 3):
        at(tclock, f"2026-01-01T00:0{minute}:00")
        f.once()
    row = Schedule.objects.get()
    assert run_ids("queue") == ["schedule:queue:2026-01-01T00:01:00Z"]
    assert row.queued_tick == datetime(2026, 1, 1, 0, 2, tzinfo=UTC)  # 00:03 dropped
    WorkflowRun.objects.filter(pk=row.last_run_id).update(status=RunStatus.FAILED)
    at(tclock, "2026-01-01T00:03:10")
    assert f.once().started == ["schedule:queue:2026-01-01T00:02:00Z"]
    assert Schedule.objects.get().queued_tick is None


def test_dst_a_gap_tick_fires_once_after_the_gap_a_repeated_one_once(tclock: FakeClock) -> None:
    daily = spec("daily", cron="30 2 * * *", timezone="Europe/Berlin", catch_up="all")
    half = spec("half-hourly", cron="*/30 * * * *", timezone="Europe/Berlin", catch_up="all")
    at(tclock, "2026-03-28T23:00:00")  # 00:00 CET, the night clocks go forward at 02:00
    f = firer(tclock, daily, half)
    f.once()
    at(tclock, "2026-03-29T02:00:00")  # 04:00 CEST
    f.once()
    # 02:30 does not exist: it fires once, at 03:00 CEST (01:00 UTC)
    assert run_ids("daily") == ["schedule:daily:2026-03-29T01:00:00Z"]
    assert len(run_ids("half-hourly")) == 6  # 00:30 .. 01:30 CET, 03:00 .. 04:00 CEST
    at(tclock, "2026-10-24T22:00:00")  # 00:00 CEST, the night clocks go back at 03:00
    Schedule.objects.all().delete()
    f = firer(tclock, daily, half, engine="e2")
    f.once()
    at(tclock, "2026-10-25T03:00:00")  # 04:00 CET
    f.once()
    # 02:30 happens twice: fired once, on its first occurrence (CEST, 00:30 UTC)
    assert run_ids("daily")[-1] == "schedule:daily:2026-10-25T00:30:00Z"
    # 02:00 and 02:30 CEST, then 02:00 and 02:30 CET: distinct instants, all fired
    repeated = [
        f"schedule:half-hourly:2026-10-25T{t}:00Z" for t in ("00:00", "00:30", "01:00", "01:30")
    ]
    assert set(repeated) <= set(run_ids("half-hourly"))


def test_a_paused_schedule_does_not_fire_and_resumes_from_now(
    tclock: FakeClock, weft_settings: Callable[..., None]
) -> None:
    weft_settings(SCHEDULES={"every-minute": {"workflow": "ts.tick", "cron": "* * * * *"}})
    f = Firer("e1", TIMING, clock=tclock)
    f.once()
    assert weft.pause_schedule("every-minute", reason="maintenance", by="alice")
    assert not weft.pause_schedule("every-minute")  # already paused
    at(tclock, "2026-01-01T00:05:00")
    assert f.once().started == []
    assert weft.resume_schedule("every-minute", by="alice")
    row = Schedule.objects.get()
    assert not row.paused and row.next_tick > datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def test_trigger_now_starts_a_run_outside_the_ticks(
    tclock: FakeClock, weft_settings: Callable[..., None]
) -> None:
    weft_settings(
        SCHEDULES={"every-minute": {"workflow": "ts.tick", "cron": "* * * * *", "args": ["x"]}}
    )
    handle = weft.trigger_schedule("every-minute", reason="now please", by="bob")
    assert handle.id.startswith("schedule:every-minute:")
    assert WorkflowRun.objects.get(pk=handle.id).args == ["x"]
    assert Schedule.objects.get().last_run_id == handle.id
    with pytest.raises(weft.ScheduleNotFoundError):
        weft.trigger_schedule("nope")


def test_a_changed_cron_restarts_from_the_next_tick(tclock: FakeClock) -> None:
    first = firer(tclock, spec())
    first.once()
    first.lease.release()  # its worker stopped; the next one syncs when it takes the lease
    at(tclock, "2026-01-01T00:00:40")
    hourly = spec(cron="0 * * * *")
    Firer("e2", TIMING, clock=tclock, specs=lambda: {"every-minute": hourly}).once()
    row = Schedule.objects.get()
    assert (row.cron, row.next_tick) == ("0 * * * *", datetime(2026, 1, 1, 1, 0, tzinfo=UTC))
    assert timedelta(0) < row.next_tick - T0
