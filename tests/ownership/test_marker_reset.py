"""The marker's repair, ``gates.reset_marker`` (behind ``manage.py weft_marker
--reset``), and its raw read, ``gates.raw_marker``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from tests.factories import EngineFactory, OwnershipMarkerFactory
from weft_django.conf import Timing
from weft_django.exceptions import OwnershipMarkerCorruptError, WeftConfigurationError
from weft_django.models import OwnershipMarker
from weft_django.ownership import MarkerResetRefused, raw_marker, read_marker, reset_marker
from weft_django.ownership.clock import db_now

pytestmark = pytest.mark.django_db

TIMING = Timing(ttl=30.0, renew_interval=5.0)  # expired 10 s after lease_expires_at


def corrupt_mode(value: str) -> None:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(OwnershipMarker._meta.db_table)} SET {quote('mode')} = %s", [value]
        )


def test_reset_establishes_an_absent_marker_now_on_the_database_clock() -> None:
    before = db_now()
    state = reset_marker("lease", timing=TIMING, established_by="tester")
    after = db_now()
    assert (state.mode, state.established_now) == ("lease", True)
    assert before - timedelta(seconds=1) <= state.established_at <= after + timedelta(seconds=1)
    stored = OwnershipMarker.objects.get()
    assert (stored.mode, stored.established_by) == ("lease", "tester")
    assert read_marker().mode == "lease"


def test_reset_replaces_a_marker_that_does_not_decode() -> None:
    OwnershipMarkerFactory(mode="workflow-lease")
    corrupt_mode("bogus")
    with pytest.raises(OwnershipMarkerCorruptError):
        read_marker()
    assert raw_marker()[0] == "bogus"
    reset_marker("workflow-lease", timing=TIMING, established_by="x" * 100)
    mode, _established_at, by = raw_marker()
    assert (mode, by) == ("workflow-lease", "x" * 64)
    assert OwnershipMarker.objects.count() == 1


def test_reset_is_refused_while_an_engine_is_live_and_changes_nothing() -> None:
    OwnershipMarkerFactory(mode="workflow-lease", established_by="engine-first")
    corrupt_mode("bogus")  # not even a corrupt row is deleted when refused
    live = EngineFactory(lease_expires_at=db_now() - timedelta(seconds=5))  # inside the grace
    EngineFactory(expired=True)
    EngineFactory(stopped=True)
    with pytest.raises(MarkerResetRefused) as refused:
        reset_marker("lease", timing=TIMING, established_by="tester")
    assert [engine.id for engine in refused.value.engines] == [live.id]
    assert raw_marker()[0] == "bogus"
    assert raw_marker()[2] == "engine-first"


def test_the_timing_given_judges_the_engines() -> None:
    EngineFactory(lease_expires_at=db_now() - timedelta(seconds=5))
    reset_marker("lease", timing=Timing(ttl=30.0, renew_interval=1.0), established_by="t")
    assert read_marker().mode == "lease"


@pytest.mark.parametrize("mode", ["bogus", "", "LEASE"])
def test_reset_refuses_a_name_that_is_not_a_mode(mode: str) -> None:
    OwnershipMarkerFactory(mode="workflow-lease")
    with pytest.raises(WeftConfigurationError, match="not an ownership mode"):
        reset_marker(mode, timing=TIMING)
    assert read_marker().mode == "workflow-lease"


def test_raw_marker_reads_the_row_as_stored() -> None:
    assert raw_marker() is None
    OwnershipMarkerFactory(mode="lease", established_by="engine-a")
    mode, established_at, by = raw_marker()
    assert (mode, by) == ("lease", "engine-a")
    assert established_at is not None
