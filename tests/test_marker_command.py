"""``manage.py weft_marker``: show the marker and live engines; reset it safely."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from tests.factories import EngineFactory, OwnershipMarkerFactory
from weft_django.exceptions import OwnershipMarkerCorruptError, OwnershipModeMismatchError
from weft_django.models import OwnershipMarker
from weft_django.ownership.clock import db_now
from weft_django.ownership.gates import establish_or_match_marker, read_marker

pytestmark = pytest.mark.django_db

needs_sqlite = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="only SQLite stores an impossible timestamp"
)


class TTY(io.StringIO):
    """Typed answers on a standard input that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


def run(*args: str, **options: Any) -> str:
    out = io.StringIO()
    call_command("weft_marker", *args, stdout=out, stderr=out, **options)
    return out.getvalue()


def corrupt_marker(column: str, value: str) -> None:
    table = connection.ops.quote_name(OwnershipMarker._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {connection.ops.quote_name(column)} = %s WHERE id = 1", [value]
        )


def stored_marker() -> tuple[str, str]:
    marker = OwnershipMarker.objects.get()
    return marker.mode, marker.established_by


# -- show -------------------------------------------------------------------------


def test_shows_an_absent_marker() -> None:
    out = run()
    assert "marker: absent" in out
    assert "Live engines: none" in out
    assert "Configured mode (WEFT['OWNERSHIP']): workflow-lease" in out


def test_shows_the_marker_and_only_live_engines() -> None:
    OwnershipMarkerFactory(mode="workflow-lease", established_by="engine-first")
    live = EngineFactory(hostname="alpha.example")
    expired = EngineFactory(expired=True)
    stopped = EngineFactory(stopped=True)
    out = run()
    assert "mode:           workflow-lease" in out
    assert "established_by: engine-first" in out
    assert "established_at: " in out
    assert "Live engines (1):" in out
    assert live.id in out and "host=alpha.example" in out
    assert expired.id not in out and stopped.id not in out
    assert "CORRUPT" not in out
    assert "DIFFERS" not in out


def test_a_stopped_engine_is_not_live_even_inside_its_grace() -> None:
    EngineFactory(stopped=True, lease_expires_at=db_now() + timedelta(seconds=30))
    assert "Live engines: none" in run()


def test_says_when_the_configured_mode_differs(weft_settings: Any) -> None:
    OwnershipMarkerFactory(mode="lease")
    assert "DIFFERS from the marker" in run()
    weft_settings(OWNERSHIP="none")  # mode none never checks the marker
    assert "DIFFERS" not in run()


def test_shows_a_corrupt_mode_without_failing() -> None:
    OwnershipMarkerFactory()
    corrupt_marker("mode", "workflow-leese")
    out = run()
    assert "mode:           workflow-leese" in out
    assert "CORRUPT" in out and "cannot be decoded" in out


@needs_sqlite
def test_shows_a_corrupt_timestamp_verbatim() -> None:
    OwnershipMarkerFactory()
    corrupt_marker("established_at", "2024-13-45 99:99:99")
    out = run()
    assert "established_at: 2024-13-45 99:99:99" in out
    assert "CORRUPT" in out


def test_runs_with_invalid_settings(settings: Any) -> None:
    settings.WEFT = {"CLAIM_TTL": "soon"}
    EngineFactory()
    out = run()
    assert "Configured mode: unknown" in out
    assert "Live engines (1):" in out


# -- reset ------------------------------------------------------------------------


def test_reset_replaces_the_marker() -> None:
    OwnershipMarkerFactory(mode="workflow-lease", established_by="engine-first")
    EngineFactory(expired=True)
    EngineFactory(stopped=True)
    before = db_now()
    out = run("--reset", "--mode", "lease", "--yes")
    assert "reset to 'lease'" in out
    marker = OwnershipMarker.objects.get()
    assert marker.mode == "lease"
    assert marker.established_by.startswith("weft_marker@")
    assert marker.established_at >= before - timedelta(seconds=1)
    state = read_marker()
    assert state is not None and state.mode == "lease"


def test_reset_without_mode_uses_the_configured_mode(weft_settings: Any) -> None:
    """The mismatch error says 'weft_marker --reset': that alone must work."""
    OwnershipMarkerFactory(mode="lease")
    with pytest.raises(OwnershipModeMismatchError) as caught:
        establish_or_match_marker("workflow-lease")
    assert "manage.py weft_marker --reset" in str(caught.value)
    run("--reset", "--yes")
    assert stored_marker()[0] == "workflow-lease"
    assert establish_or_match_marker("workflow-lease").mode == "workflow-lease"


def test_reset_without_mode_refuses_mode_none(weft_settings: Any) -> None:
    OwnershipMarkerFactory(mode="lease")
    weft_settings(OWNERSHIP="none")
    with pytest.raises(CommandError, match="pass --mode"):
        run("--reset", "--yes")
    assert stored_marker()[0] == "lease"


def test_reset_establishes_an_absent_marker() -> None:
    run("--reset", "--mode", "workflow-lease", "--yes")
    assert stored_marker()[0] == "workflow-lease"


def test_reset_refuses_while_an_engine_is_live() -> None:
    OwnershipMarkerFactory(mode="workflow-lease", established_by="engine-first")
    live = EngineFactory(hostname="alpha.example")
    other = EngineFactory(disposing=True)
    EngineFactory(expired=True)
    with pytest.raises(CommandError) as caught:
        run("--reset", "--mode", "lease", "--yes")
    message = str(caught.value)
    assert "Refusing" in message and "2 engine(s)" in message
    assert live.id in message and other.id in message
    assert stored_marker() == ("workflow-lease", "engine-first")


def test_an_engine_inside_its_grace_period_still_counts_as_live() -> None:
    """Expired only when ``lease_expires_at + 2 x CLAIM_RENEW_INTERVAL < now``."""
    OwnershipMarkerFactory()
    EngineFactory(lease_expires_at=db_now() - timedelta(seconds=5))  # grace is 10 s
    with pytest.raises(CommandError, match="live lease"):
        run("--reset", "--mode", "lease", "--yes")


@pytest.mark.parametrize("mode", ["bogus", "", "LEASE"])
def test_reset_repairs_a_corrupt_mode(mode: str) -> None:
    OwnershipMarkerFactory()
    corrupt_marker("mode", mode)
    with pytest.raises(OwnershipMarkerCorruptError, match="weft_marker --reset --mode"):
        read_marker()
    run("--reset", "--mode", "workflow-lease", "--yes")
    state = read_marker()
    assert state is not None and state.mode == "workflow-lease"


@needs_sqlite
@pytest.mark.parametrize("value", ["2024-13-45 99:99:99", "not a timestamp"])
def test_reset_repairs_a_corrupt_timestamp(value: str) -> None:
    OwnershipMarkerFactory()
    corrupt_marker("established_at", value)
    with pytest.raises(OwnershipMarkerCorruptError):
        read_marker()
    run("--reset", "--mode", "lease", "--yes")
    state = read_marker()
    assert state is not None and state.mode == "lease"


def test_reset_asks_for_confirmation_on_a_terminal() -> None:
    OwnershipMarkerFactory(mode="workflow-lease")
    out = run("--reset", "--mode", "lease", stdin=TTY("yes\n"))
    assert "Type 'yes' to continue" in out
    assert stored_marker()[0] == "lease"


@pytest.mark.parametrize("answer", ["no\n", "\n", "y\n", ""])
def test_reset_is_cancelled_without_a_yes(answer: str) -> None:
    OwnershipMarkerFactory(mode="workflow-lease")
    with pytest.raises(CommandError, match="cancelled"):
        run("--reset", "--mode", "lease", stdin=TTY(answer))
    assert stored_marker()[0] == "workflow-lease"


def test_reset_refuses_without_yes_when_not_interactive() -> None:
    OwnershipMarkerFactory(mode="workflow-lease")
    with pytest.raises(CommandError, match="--yes"):
        run("--reset", "--mode", "lease", stdin=io.StringIO("yes\n"))
    assert stored_marker()[0] == "workflow-lease"


def test_mode_needs_reset() -> None:
    with pytest.raises(CommandError, match="only used with --reset"):
        run("--mode", "lease")


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(CommandError, match="invalid choice"):
        run("--reset", "--mode", "single-writer", "--yes")
