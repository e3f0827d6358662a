"""GlobalLeaseManager: the single-writer lease of ownership mode ``lease``.

LEASE_TTL=30, LEASE_RENEW_INTERVAL=5: expired strictly after ``expires_at + 10``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from weft_django.conf import WeftSettings, get_settings
from weft_django.models import Engine, GlobalLease
from weft_django.ownership.leases.engines import register_engine
from weft_django.ownership.leases.store import GlobalLeaseManager, GlobalLeaseRow

TTL = timedelta(seconds=30)
GRACE = timedelta(seconds=10)


@pytest.fixture
def config(db, weft_settings) -> WeftSettings:
    weft_settings(OWNERSHIP="lease", LEASE_TTL=30.0, LEASE_RENEW_INTERVAL=5.0)
    return get_settings()


@pytest.fixture
def manager(config, clock):
    def make(engine_id: str) -> GlobalLeaseManager:
        register_engine(config, engine_id=engine_id, kind="test", now=clock())
        return GlobalLeaseManager(engine_id, config.lease_timing, clock=clock)

    return make


def lease() -> tuple[int, str | None, object]:
    row = GlobalLease.objects.get(id=1)
    return row.epoch, row.holder_id, row.expires_at


def test_read_creates_the_singleton_row_unheld(manager):
    a = manager("engine-a")
    assert not GlobalLease.objects.exists()
    assert a.read() == GlobalLeaseRow(0, None, None)
    assert a.read() == GlobalLeaseRow(0, None, None)
    assert GlobalLease.objects.count() == 1


def test_acquire_a_free_lease(manager, clock):
    a = manager("engine-a")
    assert not a.held
    assert a.try_acquire()
    assert (a.held, a.epoch) == (True, 1)
    assert lease() == (1, "engine-a", clock() + TTL)
    assert GlobalLease.objects.get().acquired_at == clock()


def test_a_live_lease_is_not_taken_and_the_boundary_is_strict(manager, clock):
    a = manager("engine-a")
    b = manager("engine-b")
    assert a.try_acquire()
    _, _, expires_at = lease()
    assert not b.try_acquire()
    clock.set(expires_at + GRACE)  # exactly at the deadline: live
    assert not b.try_acquire()
    assert (b.held, lease()[:2]) == (False, (1, "engine-a"))
    clock.set(expires_at + GRACE + timedelta(microseconds=1))
    assert b.try_acquire()
    assert (b.epoch, lease()[:2]) == (2, (2, "engine-b"))
    assert Engine.objects.get(id="engine-a").revocations == 1


def test_renew_extends_the_lease_and_keeps_the_epoch(manager, clock):
    a = manager("engine-a")
    b = manager("engine-b")
    a.try_acquire()
    clock.advance(35)
    assert a.renew()
    assert lease() == (1, "engine-a", clock() + TTL)
    clock.advance(35)  # past the old deadline, within the renewed one
    assert not b.try_acquire()
    # asking again while holding it is a renewal
    assert a.try_acquire()
    assert (a.epoch, lease()) == (1, (1, "engine-a", clock() + TTL))


def test_renew_after_a_takeover_fails_and_drops_the_lease(manager, clock):
    a = manager("engine-a")
    b = manager("engine-b")
    a.try_acquire()
    clock.advance(40.001)
    assert b.try_acquire()
    assert not a.renew()
    assert (a.held, a.epoch) == (False, None)
    assert lease()[:2] == (2, "engine-b")
    assert not a.renew()
    # the deposed engine cannot take it back while b is live
    assert not a.try_acquire()


def test_release_frees_the_lease_with_the_epoch_unchanged(manager, clock):
    a = manager("engine-a")
    b = manager("engine-b")
    a.try_acquire()
    assert a.release()
    assert (a.held, lease()) == (False, (1, None, None))
    assert not a.release()
    # free: taken at once, no expiry wait
    assert b.try_acquire()
    assert lease()[:2] == (2, "engine-b")
    assert Engine.objects.get(id="engine-a").revocations == 0


def test_a_deposed_release_does_not_free_the_new_holders_lease(manager, clock):
    a = manager("engine-a")
    b = manager("engine-b")
    a.try_acquire()
    clock.advance(40.001)
    b.try_acquire()
    assert not a.release()
    assert lease()[:2] == (2, "engine-b")


def test_takeover_is_conditional_on_the_epoch_read(manager, clock, monkeypatch):
    a = manager("engine-a")
    b = manager("engine-b")
    c = manager("engine-c")
    a.try_acquire()
    clock.advance(40.001)
    stale = b.read()
    assert c.try_acquire()  # c wins after b's read
    monkeypatch.setattr(b, "read", lambda: stale)
    assert not b.try_acquire()
    assert (b.held, lease()[:2]) == (False, (2, "engine-c"))
    assert Engine.objects.get(id="engine-a").revocations == 1


def test_a_holder_that_renewed_after_the_read_keeps_the_lease(manager, clock, monkeypatch):
    """The takeover UPDATE re-checks the expiry itself: a stale read is not enough."""
    a = manager("engine-a")
    b = manager("engine-b")
    a.try_acquire()
    clock.advance(40.001)
    stale = b.read()  # b would judge a's lease expired from this
    assert a.renew()
    monkeypatch.setattr(b, "read", lambda: stale)
    assert not b.try_acquire()
    assert (a.epoch, lease()[:2]) == (1, (1, "engine-a"))
    assert Engine.objects.get(id="engine-a").revocations == 0
