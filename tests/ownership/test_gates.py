"""Boot gates (docs/ownership.md): storage capability and the ownership-mode marker."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django.conf import get_settings
from weft_django.exceptions import (
    OwnershipMarkerCorruptError,
    OwnershipMarkerDeletedError,
    OwnershipModeMismatchError,
    WeftConfigurationError,
)
from weft_django.models import OwnershipMarker, mysql_collation
from weft_django.ownership import gates
from weft_django.ownership.clock import db_now
from weft_django.ownership.gates import (
    MarkerState,
    establish_or_match_marker,
    read_marker,
    run_boot_gates,
)
from weft_django.ownership.modes import ownership_for

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER")


def writes(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(WRITES)
    ]


def marker_row() -> tuple[str, object, str]:
    return OwnershipMarker.objects.values_list("mode", "established_at", "established_by").get()


def absent_on_first_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the gate's first marker read see nothing (as if read before a rival's insert)."""
    real_read = gates.read_marker
    reads: list[str] = []

    def read(*, using: str = "default") -> MarkerState | None:
        reads.append(using)
        return None if len(reads) == 1 else real_read(using=using)

    monkeypatch.setattr(gates, "read_marker", read)
    return reads


@pytest.fixture
def established(db) -> OwnershipMarker:
    """A marker established an hour ago in mode ``lease``."""
    return OwnershipMarker.objects.create(
        id=1, mode="lease", established_at=db_now() - timedelta(hours=1), established_by="old"
    )


def test_first_engine_establishes_the_marker_on_an_empty_database(db):
    assert read_marker() is None
    before = db_now()
    state = establish_or_match_marker("workflow-lease", engine_id="engine-1")
    assert state.mode == "workflow-lease"
    assert state.established_now is True
    assert before <= state.established_at <= db_now()
    assert marker_row() == ("workflow-lease", state.established_at, "engine-1")
    assert read_marker() == MarkerState("workflow-lease", state.established_at, False)


def test_later_engines_match_the_marker_without_writing(db, weft_settings):
    first = run_boot_gates(engine_id="engine-1")
    assert first.established_now
    with CaptureQueriesContext(connection) as queries:
        second = run_boot_gates(engine_id="engine-2")
    assert writes(queries) == []
    assert second == MarkerState("workflow-lease", first.established_at, established_now=False)
    assert marker_row()[2] == "engine-1"


def test_a_mode_mismatch_raises_with_both_modes_and_writes_nothing(established, weft_settings):
    stored = marker_row()
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.raises(OwnershipModeMismatchError) as excinfo,
    ):
        run_boot_gates(engine_id="engine-new")
    error = excinfo.value
    assert (error.configured_mode, error.stored_mode) == ("workflow-lease", "lease")
    assert error.established_at == established.established_at
    assert "'workflow-lease'" in str(error) and "'lease'" in str(error)
    assert established.established_at.isoformat() in str(error)
    assert isinstance(error, WeftConfigurationError)
    assert writes(queries) == []
    assert marker_row() == stored


def test_a_marker_with_an_unknown_mode_is_corrupt_and_left_alone(db):
    OwnershipMarker.objects.create(id=1, mode="bogus", established_at=db_now())
    stored = marker_row()
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.raises(OwnershipMarkerCorruptError) as excinfo,
    ):
        establish_or_match_marker("workflow-lease", engine_id="engine-1")
    message = str(excinfo.value)
    assert "'bogus'" in message
    assert "never overwrites" in message and "weft_marker --reset" in message
    assert writes(queries) == []
    assert marker_row() == stored


@pytest.mark.skipif(
    connection.vendor != "sqlite", reason="only SQLite can store a non-timestamp in a datetime"
)
@pytest.mark.parametrize(
    "garbage", ["not a time", "2024-13-45 10:00:00", "2024-01-01 25:61:00", ""]
)
def test_a_marker_with_a_garbage_timestamp_is_corrupt_and_left_alone(db, garbage):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO weft_django_ownershipmarker (id, mode, established_at, established_by) "
            "VALUES (1, 'workflow-lease', %s, 'someone')",
            [garbage],
        )
    with pytest.raises(OwnershipMarkerCorruptError) as excinfo:
        establish_or_match_marker("workflow-lease")
    assert repr(garbage) in str(excinfo.value)  # the stored value, verbatim
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT mode, CAST(established_at AS TEXT), established_by "
            "FROM weft_django_ownershipmarker"
        )
        assert cursor.fetchall() == [("workflow-lease", garbage, "someone")]


def test_a_lost_insert_race_re_reads_the_winners_marker(db, monkeypatch):
    # Another engine inserts the marker between our read (absent) and our insert.
    winner_at = db_now() - timedelta(seconds=1)
    OwnershipMarker.objects.create(id=1, mode="workflow-lease", established_at=winner_at)
    reads = absent_on_first_read(monkeypatch)
    state = establish_or_match_marker("workflow-lease", engine_id="loser")
    assert len(reads) == 2
    assert state == MarkerState("workflow-lease", winner_at, established_now=False)
    assert marker_row() == ("workflow-lease", winner_at, "")


def test_a_lost_insert_race_to_another_mode_is_a_mismatch(db, monkeypatch):
    OwnershipMarker.objects.create(id=1, mode="lease", established_at=db_now())
    absent_on_first_read(monkeypatch)
    with pytest.raises(OwnershipModeMismatchError) as excinfo:
        establish_or_match_marker("workflow-lease")
    assert excinfo.value.stored_mode == "lease"


def test_marker_absent_again_after_a_lost_race_was_deleted_concurrently(db, monkeypatch):
    # The insert collides with a row, but the re-read finds nothing: deleted in between.
    OwnershipMarker.objects.create(id=1, mode="workflow-lease", established_at=db_now())
    monkeypatch.setattr(gates, "read_marker", lambda *, using="default": None)
    with pytest.raises(OwnershipMarkerDeletedError) as excinfo:
        establish_or_match_marker("workflow-lease")
    assert "deleted concurrently" in str(excinfo.value)


@pytest.mark.parametrize("stored", [None, "lease", "bogus"])
def test_mode_none_never_touches_the_marker(db, weft_settings, stored):
    weft_settings(OWNERSHIP="none")
    if stored is not None:
        OwnershipMarker.objects.create(id=1, mode=stored, established_at=db_now())
    with CaptureQueriesContext(connection) as queries:
        ownership_for("engine-1", get_settings()).boot(kind="test")
    assert queries.captured_queries  # the engine row is registered...
    assert not [q for q in queries.captured_queries if "ownershipmarker" in q["sql"].lower()]
    assert list(OwnershipMarker.objects.values_list("mode", flat=True)) == (
        [] if stored is None else [stored]
    )


@pytest.mark.parametrize("mode", ["workflow-lease", "lease"])
def test_capability_gate_failure_names_the_configured_mode(db, weft_settings, monkeypatch, mode):
    weft_settings(OWNERSHIP=mode)
    monkeypatch.setattr(connection, "vendor", "oracle")
    with pytest.raises(WeftConfigurationError) as excinfo:
        run_boot_gates(engine_id="engine-1")
    assert f"Ownership mode {mode!r}" in str(excinfo.value)
    assert "'oracle'" in str(excinfo.value)
    monkeypatch.undo()
    assert not OwnershipMarker.objects.exists()  # gate 1 failed before gate 2


def test_capability_gate_requires_transactions(db, weft_settings, monkeypatch):
    monkeypatch.setattr(connection.features, "supports_transactions", False)
    with pytest.raises(WeftConfigurationError, match="'workflow-lease'"):
        run_boot_gates(engine_id="engine-1")
    monkeypatch.undo()
    assert not OwnershipMarker.objects.exists()


def test_incoherent_timing_fails_before_any_database_access(db, weft_settings):
    weft_settings(CLAIM_TTL=10.0, CLAIM_RENEW_INTERVAL=5.0)
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.raises(WeftConfigurationError),
    ):
        run_boot_gates()
    assert queries.captured_queries == []
    assert not OwnershipMarker.objects.exists()


def test_gates_use_the_settings_passed_in(db, weft_settings):
    passed = dataclasses.replace(get_settings(), ownership="lease")  # settings.WEFT says otherwise
    state = run_boot_gates(passed)
    assert (state.mode, state.established_now) == ("lease", True)
    assert marker_row()[0] == "lease"


# -- MariaDB/MySQL: what the capability gate checks there ------------------------------


def _gate_refuses(mode: str = "workflow-lease") -> str:
    with pytest.raises(WeftConfigurationError) as excinfo:
        run_boot_gates(engine_id="engine-1")
    assert not OwnershipMarker.objects.exists()  # gate 1 failed before gate 2
    return str(excinfo.value)


@pytest.mark.mysql
@pytest.mark.django_db(transaction=True)  # ALTER TABLE commits on MySQL
def test_mysql_gate_refuses_a_myisam_table(weft_settings):
    table = OwnershipMarker._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} ENGINE=MyISAM")
    try:
        message = _gate_refuses()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} ENGINE=InnoDB")
    assert f"{table} (MyISAM)" in message
    assert "ENGINE=InnoDB" in message and "'workflow-lease'" in message
    assert run_boot_gates(engine_id="engine-1").established_now  # InnoDB again: it passes


@pytest.mark.mysql
def test_mysql_gate_refuses_reads_of_uncommitted_data(db, weft_settings):
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
    try:
        message = _gate_refuses()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    assert "READ-UNCOMMITTED" in message and "READ COMMITTED" in message


@pytest.mark.mysql
@pytest.mark.parametrize("level", ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"])
def test_mysql_gate_accepts_read_committed_and_stronger(db, weft_settings, level):
    with connection.cursor() as cursor:
        cursor.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {level}")
    try:
        assert gates.mysql_problems(connection) == []
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")


@pytest.mark.mysql
@pytest.mark.django_db(transaction=True)
def test_mysql_gate_refuses_ids_compared_without_case(weft_settings):
    column = "workflow_name"
    table = "weft_django_workflowrun"
    with connection.cursor() as cursor:
        cursor.execute(
            f"ALTER TABLE {table} MODIFY {column} varchar(255) "
            "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL"
        )
    try:
        message = _gate_refuses()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                f"ALTER TABLE {table} MODIFY {column} varchar(255) "
                f"CHARACTER SET utf8mb4 COLLATE {mysql_collation(connection)} NOT NULL"
            )
    assert f"{table}.{column}" in message and "migrate weft_django" in message
    assert gates.mysql_problems(connection) == []
