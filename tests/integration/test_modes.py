"""Ownership modes ``lease`` and ``none`` with real worker processes (docs/ownership.md)."""

from __future__ import annotations

import signal
import time

import pytest

import weft_django as weft
from tests.integration.helpers import FAST
from tests.integration.itapp.models import StepExecution
from tests.integration.queries import all_completed, duplicates, naps
from weft_django.models import Engine, GlobalLease, OwnershipMarker

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LEASE_TTL = float(FAST["WEFT_LEASE_TTL"])
LEASE_RENEW = float(FAST["WEFT_LEASE_RENEW_INTERVAL"])
SLACK = 0.3


def _lease_holder() -> str | None:
    return GlobalLease.objects.filter(id=1).values_list("holder_id", flat=True).first()


def test_lease_mode_standby_takes_over_after_the_holder_is_killed(workers, wait):
    OwnershipMarker.objects.all().delete()  # the marker is store-wide: a fresh one per mode
    a = workers.start("a", WEFT_OWNERSHIP="lease")
    wait(lambda: _lease_holder() == a.engine_id, 10, what="a to take the global lease")
    b = workers.start("b", WEFT_OWNERSHIP="lease")
    assert OwnershipMarker.objects.get().mode == "lease"

    first = [weft.start("it.steps", 3, workflow_id=f"lease-{i}").id for i in range(4)]
    wait(lambda: all_completed(first), 30, what="the lease holder to run them")
    assert set(StepExecution.objects.filter(run_id__in=first).values_list("pid", flat=True)) == {
        a.pid
    }

    # Kill the holder in the middle of a run: the standby must take the lease
    # and finish that run (it is "running", with no wake hint and no timer).
    run_id = "lease-crash"
    weft.start("it.steps", 4, nap_at=2, nap_s=60, workflow_id=run_id)
    wait(lambda: naps(run_id), 30, what="the holder to start napping")
    killed = a.send(signal.SIGKILL)
    a.wait(10)
    wait(
        lambda: _lease_holder() == b.engine_id,
        LEASE_TTL + 3 * LEASE_RENEW + 10,
        interval=0.02,
        what="the standby to take the lease",
    )
    took = time.monotonic() - killed
    later = weft.start("it.steps", 2, workflow_id="lease-later").id
    wait(lambda: all_completed([run_id, later]), 30, what="the standby to finish the runs")
    print(f"standby took the lease {took:.2f}s after SIGKILL")
    assert took <= LEASE_TTL + 3 * LEASE_RENEW + SLACK
    assert [pid for pid, _at in naps(run_id)] == [a.pid, b.pid]
    assert duplicates([*first, run_id, later]) == {}


def test_none_mode_second_engine_logs_the_warning(workers, wait):
    OwnershipMarker.objects.all().delete()
    a = workers.start("a", WEFT_OWNERSHIP="none")
    b = workers.start("b", WEFT_OWNERSHIP="none")
    wait(
        lambda: "Ownership mode 'none' allows one worker only" in b.log(),
        10,
        what="the second engine's warning",
    )
    assert a.engine_id in b.log()
    assert "allows one worker only" not in a.log()
    assert not OwnershipMarker.objects.exists()  # mode none never touches the marker
    assert Engine.objects.filter(ownership_mode="none").count() == 2
