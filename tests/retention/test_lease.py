"""The pruner lease: one holder at a time, fenced by its token (conditional UPDATEs)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from weft_django.models import PrunerLease
from weft_django.ownership.clock import db_now
from weft_django.retention.lease import PrunerLeaseManager

pytestmark = pytest.mark.django_db(transaction=True)


def expire() -> None:
    PrunerLease.objects.filter(id=1).update(expires_at=db_now() - timedelta(seconds=1))


def test_one_holder_at_a_time_and_renewal_keeps_it() -> None:
    a, b = PrunerLeaseManager("a", 30), PrunerLeaseManager("b", 30)
    assert a.try_acquire()
    assert not b.try_acquire()
    assert a.try_acquire()  # a renewal
    assert PrunerLease.objects.values_list("holder", "token").get() == ("a", 1)
    assert a.release()
    assert b.try_acquire()
    assert PrunerLease.objects.values_list("holder", "token").get() == ("b", 2)


def test_an_expired_lease_is_taken_over_and_the_old_holder_is_fenced() -> None:
    a, b = PrunerLeaseManager("a", 30), PrunerLeaseManager("b", 30)
    assert a.try_acquire()
    expire()
    assert b.try_acquire()
    assert not a.renew()
    assert not a.held
    assert not a.release()  # nothing to release, and b's lease untouched
    assert PrunerLease.objects.values_list("holder", "token").get() == ("b", 2)


def test_a_stale_token_cannot_release_the_new_holders_lease() -> None:
    a, b = PrunerLeaseManager("a", 30), PrunerLeaseManager("a", 30)  # same id, new boot
    assert a.try_acquire()
    expire()
    assert b.try_acquire()
    stale = PrunerLeaseManager("a", 30)
    stale.token = a.token
    assert not stale.release()
    assert PrunerLease.objects.values_list("holder", "token").get() == ("a", 2)


def test_an_expired_holder_cannot_renew() -> None:
    a = PrunerLeaseManager("a", 30)
    assert a.try_acquire()
    expire()
    assert not a.renew()


def test_the_row_is_a_singleton() -> None:
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        PrunerLease.objects.create(id=2)
    with pytest.raises(IntegrityError), transaction.atomic():
        PrunerLease.objects.create(id=1, token=-1)
