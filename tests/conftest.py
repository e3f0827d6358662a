"""Shared fixtures: a controllable database-side clock, engines, settings."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings

from tests.integration.helpers import redis_problem
from weft_django.conf import get_settings
from weft_django.models import EngineKind
from weft_django.ownership.claims.cooldown import Cooldown
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.clock import db_now
from weft_django.ownership.leases.engines import register_engine
from weft_django.runtime.engine import WorkflowEngine
from weft_django.testing import WorkflowDriver
from weft_django.worker import Worker

from .workers import RENEW, Running


def _vendor() -> str:
    engine = django_settings.DATABASES["default"]["ENGINE"]
    return "postgresql" if "postgresql" in engine else engine.rsplit(".", 1)[-1]


@functools.cache
def _redis_problem() -> str | None:
    return redis_problem()


def services_required() -> bool:
    """Under CI (``CI=true`` or ``WEFT_REQUIRE_SERVICES=1``) a missing service fails."""
    return os.environ.get("CI") == "true" or os.environ.get("WEFT_REQUIRE_SERVICES") == "1"


# Vendor markers: a test (or module) marked ``postgres`` and/or ``mysql`` runs
# only on those databases, in that pass of bin/test; the marks closest to the
# test win (a PostgreSQL-only test in a module marked for both).
VENDOR_MARKERS = {
    "postgres": ("postgresql", "PostgreSQL", "DATABASE_URL=postgres://..."),
    "mysql": ("mysql", "MariaDB/MySQL", "DATABASE_URL=mysql://..."),
}


def _vendor_marks(item: pytest.Item) -> list[str]:
    node: pytest.Item | pytest.Collector | None = item
    while node is not None:
        marks = [mark.name for mark in node.own_markers if mark.name in VENDOR_MARKERS]
        if marks:
            return marks
        node = node.parent
    return []


def pytest_runtest_setup(item: pytest.Item) -> None:
    marks = _vendor_marks(item)
    if marks and _vendor() not in {VENDOR_MARKERS[mark][0] for mark in marks}:
        needs = " or ".join(VENDOR_MARKERS[mark][1] for mark in marks)
        passes = ", ".join(VENDOR_MARKERS[mark][2] for mark in marks)
        pytest.skip(f"needs {needs}: runs in that pass of bin/test ({passes})")
    if item.get_closest_marker("redis") and _redis_problem() is not None:
        if services_required():
            pytest.fail(f"{_redis_problem()}; CI must run the Celery tests")
        pytest.skip(f"needs Redis: {_redis_problem()} (set WEFT_TEST_REDIS_URL)")


class FakeClock:
    """One shared, manually advanced clock standing in for the database's."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, value: datetime) -> None:
        with self._lock:
            self._now = value


class FakeMonotonic:
    def __init__(self) -> None:
        self.value = 1000.0

    def __call__(self) -> float:
        return self.value


@pytest.fixture
def weft_settings(settings: object) -> Callable[..., None]:
    """``weft_settings(CLAIM_TTL=6, ...)`` overrides keys of ``settings.WEFT``."""

    def apply(**values: object) -> None:
        current = dict(getattr(settings, "WEFT", {}))
        current.update(values)
        settings.WEFT = current  # type: ignore[attr-defined]

    apply(
        OWNERSHIP="workflow-lease",
        CLAIM_TTL=30.0,
        CLAIM_RENEW_INTERVAL=5.0,
        TICK_INTERVAL=0.25,
        NOTIFY=True,
    )
    return apply


@pytest.fixture
def clock(db: None) -> FakeClock:
    return FakeClock(db_now())


@pytest.fixture
def monotonic() -> FakeMonotonic:
    return FakeMonotonic()


@pytest.fixture
def make_registry(
    db: None, weft_settings: Callable[..., None], clock: FakeClock, monotonic: FakeMonotonic
) -> Iterator[Callable[..., ClaimRegistry]]:
    """Register an engine row and return its ClaimRegistry on the shared fake clock."""

    def make(engine_id: str | None = None, *, kind: str = "test") -> ClaimRegistry:
        config = get_settings()
        engine = register_engine(config, kind=kind, engine_id=engine_id, now=clock())
        cooldown = Cooldown(
            base=config.claim_renew_interval, cap=4 * config.claim_ttl, clock=monotonic
        )
        return ClaimRegistry(engine.id, timing=config.claim_timing, clock=clock, cooldown=cooldown)

    yield make


@pytest.fixture
def metric() -> Callable[..., float]:
    """``metric("weft_workflow_claim_attempts_total", outcome="deposed")``: the current
    value of one sample of weft_django's metrics registry (0.0 when not exported)."""
    from weft_django.ownership.metrics import REGISTRY

    def read(name: str, **labels: str) -> float:
        value = REGISTRY.get_sample_value(name, labels)
        return 0.0 if value is None else value

    return read


@pytest.fixture
def make_engine(db: None, weft_settings: Callable[..., None]) -> Iterator[Callable[..., Any]]:
    """``make_engine()`` -> a started in-process WorkflowEngine (kind ``test``)."""
    made: list[WorkflowEngine] = []

    def make(engine_id: str | None = None) -> WorkflowEngine:
        engine = WorkflowEngine(kind=EngineKind.TEST, engine_id=engine_id).start()
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


@pytest.fixture
def driver(db: None, weft_settings: Callable[..., None]) -> Iterator[WorkflowDriver]:
    with WorkflowDriver() as running:
        yield running


@pytest.fixture
def fast(weft_settings: Callable[..., None]) -> Callable[..., None]:
    """Short timings for in-process workers (TTL 1 s, renew 0.2 s, tick 0.02 s)."""
    weft_settings(CLAIM_TTL=1.0, CLAIM_RENEW_INTERVAL=RENEW, TICK_INTERVAL=0.02)
    return weft_settings


@pytest.fixture
def start_worker(fast: Callable[..., None]) -> Iterator[Callable[..., Running]]:
    """``start_worker(**worker_kwargs)``: a Worker running in a thread, stopped at teardown."""
    started: list[Running] = []

    def start(**kwargs: Any) -> Running:
        kwargs.setdefault("install_signal_handlers", False)
        kwargs.setdefault("concurrency", 2)
        kwargs.setdefault("shutdown_grace", 5.0)
        running = Running(Worker(**kwargs))
        started.append(running)
        return running.wait_started()

    yield start
    for running in started:
        if running.thread.is_alive():
            running.stop()
