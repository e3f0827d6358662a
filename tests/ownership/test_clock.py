"""The clocks of ownership/clock.py: the database's, and the steady one the fast tick reads."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django.ownership.clock import SteadyClock, db_now

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class FakeTime:
    def __init__(self) -> None:
        self.mono = 100.0
        self.reads = 0
        self.db = T0

    def read(self) -> datetime:
        self.reads += 1
        return self.db

    def monotonic(self) -> float:
        return self.mono


def test_a_steady_clock_reads_once_per_max_age_and_counts_forward_between() -> None:
    fake = FakeTime()
    clock = SteadyClock(fake.read, 1.0, monotonic=fake.monotonic)
    assert clock() == T0 and fake.reads == 1
    fake.mono += 0.25
    assert clock() == T0 + timedelta(seconds=0.25) and fake.reads == 1
    fake.mono += 0.5
    assert clock() == T0 + timedelta(seconds=0.75) and fake.reads == 1
    fake.mono += 0.25  # a whole max_age since the read: read again
    fake.db = T0 + timedelta(seconds=5)  # the database's clock stepped meanwhile
    assert clock() == T0 + timedelta(seconds=5) and fake.reads == 2


def test_a_seeded_steady_clock_counts_forward_from_the_seed_without_a_read() -> None:
    fake = FakeTime()
    seed = (T0 - timedelta(seconds=3), fake.mono - 0.5)  # read 0.5 s ago (a turn's prefetch)
    clock = SteadyClock(fake.read, float("inf"), monotonic=fake.monotonic, seed=seed)
    assert clock() == T0 - timedelta(seconds=2.5) and fake.reads == 0
    fake.mono += 3600  # no max age: never read again
    assert clock() == T0 + timedelta(seconds=3597.5) and fake.reads == 0


def test_a_steady_clock_reads_again_when_the_monotonic_clock_goes_back() -> None:
    fake = FakeTime()
    clock = SteadyClock(fake.read, 1.0, monotonic=fake.monotonic)
    clock()
    fake.mono -= 0.5
    assert clock() == T0 and fake.reads == 2


def test_a_steady_clock_does_not_cache_a_failed_read() -> None:
    fake = FakeTime()
    failing = {"left": 1}

    def read() -> datetime:
        if failing["left"]:
            failing["left"] -= 1
            raise RuntimeError("database down")
        return fake.read()

    clock = SteadyClock(read, 1.0, monotonic=fake.monotonic)
    with pytest.raises(RuntimeError):
        clock()
    assert clock() == T0 and fake.reads == 1


@pytest.mark.django_db
def test_the_tick_clock_reads_the_database_once_per_second(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    with CaptureQueriesContext(connection) as reads:
        first = engine.tick_now()
        later = [engine.tick_now() for _ in range(20)]
    assert len(reads.captured_queries) == 1
    assert all(first <= value for value in later)
    assert abs((db_now() - later[-1]).total_seconds()) < 0.5


@pytest.mark.django_db
def test_the_tick_clock_follows_a_test_time_offset_at_once(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    engine.tick_now()
    engine.time_offset = timedelta(hours=2)
    assert engine.tick_now() - db_now() > timedelta(hours=1, minutes=59)
