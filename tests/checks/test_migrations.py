"""weft.E018: weft_django's migrations not all applied (issue 24). ``manage.py check``
fails with "run `manage.py migrate`", ``weft_worker`` refuses to start with the
same sentence (``--once`` too), and neither ``migrate`` itself nor the other
commands that run the system checks are blocked."""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection
from django.db.migrations.recorder import MigrationRecorder

from tests.scratch import Scratch, explained
from weft_django.checks import configuration as weft_checks
from weft_django.models import Engine

MIGRATIONS = sorted(
    path.stem
    for path in (Path(weft_checks.__file__).parent.parent / "migrations").glob(
        "[0-9][0-9][0-9][0-9]_*.py"
    )
)
LAST = MIGRATIONS[-1]
AFTER_0011 = len(MIGRATIONS) - MIGRATIONS.index("0011_wake_index_keys") - 1
MIGRATE = "run `manage.py migrate`"


def e018(*argv: str) -> list[checks.CheckMessage]:
    """The weft checks as ``manage.py <argv>`` runs them, weft.E018 only."""
    saved = sys.argv
    sys.argv = ["manage.py", *argv]
    try:
        return [m for m in checks.run_checks(tags=["weft"]) if m.id == "weft.E018"]
    finally:
        sys.argv = saved


def _forget(*names: str) -> None:
    """Mark migrations unapplied in django_migrations (the test's transaction undoes it)."""
    MigrationRecorder.Migration.objects.filter(app="weft_django", name__in=names).delete()


@pytest.mark.django_db
def test_a_migrated_database_passes() -> None:
    assert weft_checks.unapplied_migrations("default") == []
    assert weft_checks.migration_problem() is None
    assert e018("check") == []


@pytest.mark.django_db
def test_unapplied_migrations_fail_manage_py_check() -> None:
    _forget(LAST)
    assert weft_checks.unapplied_migrations("default") == [LAST]
    [error] = e018("check")
    assert error.level == checks.ERROR
    assert f"Database 'default' has 1 unapplied weft_django migration(s) ({LAST})" in error.msg
    assert MIGRATE in error.msg and "manage.py migrate" in error.hint


@pytest.mark.django_db
def test_many_unapplied_migrations_are_named_first_to_last() -> None:
    _forget("0010_fewer_indexes", "0011_wake_index_keys", LAST, "0001_initial")
    assert weft_checks.unapplied_migrations("default") == [
        "0001_initial",
        "0010_fewer_indexes",
        "0011_wake_index_keys",
        LAST,
    ]
    [error] = e018("check")
    assert f"4 unapplied weft_django migration(s) (0001_initial to {LAST})" in error.msg


@pytest.mark.django_db
@pytest.mark.parametrize(
    "command", ["migrate", "makemigrations", "showmigrations", "runserver", "wait_for_db", "test"]
)
def test_only_manage_py_check_reports_it(command: str) -> None:
    """migrate runs every system check (with its database) before it migrates: an
    error there would make the fix impossible. No other command is blocked either."""
    _forget(LAST)
    assert e018(command) == []
    assert e018() == []  # not a management command at all (e.g. pytest)


@pytest.mark.django_db
def test_the_databases_of_the_task_backends_are_checked(settings: Any) -> None:
    settings.TASKS = {
        "default": {
            "BACKEND": "weft_django.backends.WeftTaskBackend",
            "OPTIONS": {"DATABASE": "default"},
        },
        "other": {"BACKEND": "weft_django.backends.WeftTaskBackend", "OPTIONS": {"DATABASE": 3}},
    }
    assert weft_checks.weft_databases() == ["default"]


def test_an_unreachable_database_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """No database in CI's `manage.py check --deploy`: nothing to compare."""

    def unreachable(using: str) -> list[str]:
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(weft_checks, "unapplied_migrations", unreachable)
    assert weft_checks.migration_problem() is None
    assert e018("check") == []


def test_another_database_is_named_in_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weft_checks, "unapplied_migrations", lambda using: [LAST])
    problem = weft_checks.migration_problem("replica")
    assert problem is not None and problem.startswith("Database 'replica' has 1 unapplied")
    assert "run `manage.py migrate --database replica` first" in problem


@pytest.mark.django_db
def test_the_worker_refuses_to_start_and_writes_nothing() -> None:
    _forget(LAST)
    with pytest.raises(CommandError) as caught:
        call_command("weft_worker", "--once")
    message = str(caught.value)
    assert message.startswith("weft_worker cannot start: Database 'default' has 1 unapplied")
    assert LAST in message and MIGRATE in message
    assert message.endswith("Nothing was written to the database.")
    assert not Engine.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_silencing_e018_lets_the_worker_start(settings: Any, weft_settings: Any) -> None:
    weft_settings(TICK_INTERVAL=0.02, CLAIM_TTL=1.0, CLAIM_RENEW_INTERVAL=0.2)
    _forget(LAST)
    try:
        settings.SILENCED_SYSTEM_CHECKS = ["weft.E018"]
        assert weft_checks.worker_migration_problem() is None
        assert weft_checks.migration_problem() is not None  # the check itself still finds it
        call_command("weft_worker", "--once")
        assert Engine.objects.get().status == "stopped"
    finally:
        MigrationRecorder(connection).record_applied("weft_django", LAST)


# -- as processes, on a scratch SQLite database -----------------------------------------


@pytest.mark.integration
def test_a_partly_migrated_database_end_to_end(tmp_path: Any) -> None:
    """The reported case: weft_django migrated up to 0011 only. The old worker started
    and logged "column weft_django_claim.released_at does not exist" every 5 s."""
    project = Scratch(tmp_path)
    assert project.run("migrate", "-v0").returncode == 0
    assert project.run("migrate", "weft_django", "0011", "-v0").returncode == 0

    check = project.run("check")
    assert check.returncode != 0
    text = explained(check.stderr)
    assert "weft.E018" in text and LAST in text and MIGRATE in text

    assert project.run("showmigrations", "weft_django").returncode == 0  # not blocked

    worker = project.run("weft_worker", "--once")
    assert worker.returncode != 0
    text = explained(worker.stderr)
    assert text.startswith(
        f"CommandError: weft_worker cannot start: Database 'default' has {AFTER_0011} unapplied"
    )
    assert LAST in text and MIGRATE in text and "\n" not in text
    with closing(sqlite3.connect(project.database)) as db:
        assert db.execute("SELECT COUNT(*) FROM weft_django_engine").fetchone() == (0,)

    migrate = project.run("migrate", "-v0")  # the system checks do not block the fix
    assert migrate.returncode == 0, migrate.stderr
    check = project.run("check")
    assert check.returncode == 0, check.stderr
    assert "no issues" in check.stdout
    worker = project.run("weft_worker", "--once")
    assert worker.returncode == 0, worker.stderr


@pytest.mark.integration
def test_a_database_never_migrated(tmp_path: Any) -> None:
    project = Scratch(tmp_path)
    check = project.run("check")
    assert check.returncode != 0
    text = explained(check.stderr)
    assert f"{len(MIGRATIONS)} unapplied weft_django migration(s) (0001_initial to {LAST})" in text
    assert MIGRATE in text
    assert project.run("weft_worker", "--once").returncode != 0
    assert project.run("migrate", "-v0").returncode == 0
