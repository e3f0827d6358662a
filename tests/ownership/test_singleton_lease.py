"""The one single-row lease implementation, through both of its uses: the global
lease of mode ``lease`` (expiry grace 2 x 5 s) and the pruner lease (no grace,
strict renewal). Expiry is judged by ``Timing`` on the database clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db.models import Model

from weft_django.conf import Timing, get_settings
from weft_django.models import Engine, GlobalLease, PrunerLease
from weft_django.ownership import SingletonLease
from weft_django.ownership.clock import db_now
from weft_django.ownership.leases.engines import register_engine
from weft_django.ownership.leases.store import GlobalLeaseManager
from weft_django.retention.lease import PrunerLeaseManager

pytestmark = pytest.mark.django_db(transaction=True)

Make = Callable[..., SingletonLease]


@pytest.fixture(params=["global", "pruner"])
def make(request: pytest.FixtureRequest) -> Make:
    config = get_settings()

    def build(engine_id: str, clock=None) -> SingletonLease:
        if request.param == "pruner":
            return PrunerLeaseManager(engine_id, 30.0, clock=clock)
        if not Engine.objects.filter(id=engine_id).exists():
            register_engine(config, engine_id=engine_id, kind="test")
        return GlobalLeaseManager(engine_id, Timing(30.0, 5.0), clock=clock)

    return build


def row(lease: SingletonLease) -> tuple[int, str | None]:
    found = lease.read()
    return found.token, found.holder


def set_expiry(lease: SingletonLease, seconds_from_now: float) -> None:
    expires_at = db_now() + timedelta(seconds=seconds_from_now)
    lease.model._default_manager.filter(id=1).update(expires_at=expires_at)


def test_both_leases_are_the_one_implementation() -> None:
    assert issubclass(GlobalLeaseManager, SingletonLease)
    assert issubclass(PrunerLeaseManager, SingletonLease)
    models: set[type[Model]] = {GlobalLeaseManager.model, PrunerLeaseManager.model}
    assert models == {GlobalLease, PrunerLease}


def test_acquire_renew_release_on_the_database_clock(make: Make) -> None:
    a, b = make("engine-a"), make("engine-b")
    assert row(a) == (0, a.free)
    assert a.try_acquire()
    assert (a.token, row(a)) == (1, (1, "engine-a"))
    assert a.live_holder() == "engine-a"
    assert not b.try_acquire()
    assert a.try_acquire()  # asking again while holding it is a renewal
    assert a.renew()
    assert row(a) == (1, "engine-a")
    assert a.release()
    assert (a.held, row(a), a.live_holder()) == (False, (1, a.free), None)
    assert not a.release()
    assert b.try_acquire()  # free: taken at once, with a higher token
    assert row(b) == (2, "engine-b")


def test_expiry_follows_the_timing_rule_on_the_database_clock(make: Make) -> None:
    a, b = make("engine-a"), make("engine-b")
    assert a.try_acquire()
    grace = a.timing.expiry_grace
    set_expiry(a, -grace + 5)  # ended, but within the grace: live
    assert a.live_holder() == "engine-a"
    assert not b.try_acquire()
    set_expiry(a, -grace - 1)  # past the grace: expired
    assert a.live_holder() is None
    assert b.try_acquire()
    assert row(b) == (2, "engine-b")
    assert not a.renew()  # fenced by the token
    assert (a.held, a.release(), row(b)) == (False, False, (2, "engine-b"))


def test_the_expiry_boundary_is_strict(make: Make, clock) -> None:
    a, b = make("engine-a", clock), make("engine-b", clock)
    assert a.try_acquire()
    deadline = a.read().expires_at + timedelta(seconds=a.timing.expiry_grace)
    clock.set(deadline)  # exactly at the deadline: live
    assert not b.try_acquire()
    clock.set(deadline + timedelta(microseconds=1))
    assert b.try_acquire()


def test_a_stale_read_cannot_take_the_lease(make: Make, clock, monkeypatch) -> None:
    """The UPDATE re-checks token, holder and expiry: a renewal since the read wins."""
    a, b = make("engine-a", clock), make("engine-b", clock)
    assert a.try_acquire()
    clock.advance(30 + a.timing.expiry_grace + 1)
    stale = b.read()
    # a renewal lands after b's read (as a's would have, in time)
    a.model._default_manager.filter(id=1).update(expires_at=clock() + timedelta(seconds=30))
    monkeypatch.setattr(b, "read", lambda: stale)
    assert not b.try_acquire()
    assert row(a) == (1, "engine-a")


def test_only_a_strict_lease_stops_a_holder_past_its_expiry(make: Make, clock) -> None:
    a = make("engine-a", clock)
    assert a.try_acquire()
    clock.advance(30 + a.timing.expiry_grace + 1)  # expired, nobody took it over
    assert a.renew() is (not a.strict_renewal)
    assert a.held is (not a.strict_renewal)


def test_a_takeover_of_the_global_lease_counts_a_revocation(clock) -> None:
    config = get_settings()
    for engine_id in ("engine-a", "engine-b"):
        register_engine(config, engine_id=engine_id, kind="test")
    a = GlobalLeaseManager("engine-a", Timing(30.0, 5.0), clock=clock)
    b = GlobalLeaseManager("engine-b", Timing(30.0, 5.0), clock=clock)
    assert a.try_acquire()
    clock.advance(40.001)
    assert b.try_acquire()
    assert Engine.objects.get(id="engine-a").revocations == 1
    assert Engine.objects.get(id="engine-b").revocations == 0
