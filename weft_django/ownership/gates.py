"""Boot gates (docs/ownership.md): run before any claim, recovery or poll.

1. Storage capability: atomic conditional writes inside transactions (on
   MySQL/MariaDB also: InnoDB tables, reads of committed data only, and ids
   compared exactly).
2. The store-wide ownership-mode marker: establish it (first engine wins),
   or match it; never overwrite it.
3. Timing coherence: the settings checks of :mod:`weft_django.conf`.

The marker's repair (:func:`reset_marker`, ``manage.py weft_marker --reset``)
lives here too, beside the rules it repairs.

The ownership strategy of the configured mode decides whether its engines
pass them (mode ``none`` has no marker and skips them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db import IntegrityError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import MODES, NO_OWNERSHIP, Timing, WeftSettings, get_settings
from ..exceptions import (
    OwnershipMarkerCorruptError,
    OwnershipMarkerDeletedError,
    OwnershipModeMismatchError,
    WeftConfigurationError,
    WeftError,
)
from ..models import Engine, OwnershipMarker, db_for, is_mariadb, mysql_collation
from .clock import as_aware, db_now
from .leases.state import live_engines

logger = logging.getLogger("weft_django.ownership")

SUPPORTED_VENDORS = ("postgresql", "sqlite", "mysql")


@dataclass(frozen=True)
class MarkerState:
    mode: str
    established_at: datetime
    established_now: bool


def check_capability(mode: str, *, using: str = "default") -> None:
    """Gate 1: the database must give atomic conditional writes in transactions."""
    connection = connections[using]
    if connection.vendor not in SUPPORTED_VENDORS or not connection.features.supports_transactions:
        raise WeftConfigurationError(
            f"Ownership mode {mode!r} needs a database with atomic conditional writes in "
            f"transactions, but {connection.vendor!r} (alias {using!r}) does not provide "
            f"them. Use PostgreSQL, MySQL/MariaDB with InnoDB, or SQLite, or set "
            f"WEFT['OWNERSHIP'] = {NO_OWNERSHIP!r} for a single worker."
        )
    problems = mysql_problems(connection) if connection.vendor == "mysql" else []
    if problems:
        raise WeftConfigurationError(
            f"Ownership mode {mode!r} cannot run on this MySQL/MariaDB database (alias "
            f"{using!r}): " + " ".join(problems)
        )


# The isolation levels weft runs under on MySQL/MariaDB: all but READ UNCOMMITTED,
# whose plain reads see rows that may still roll back (a run whose start() is undone).
MYSQL_ISOLATION_LEVELS = ("READ-COMMITTED", "REPEATABLE-READ", "SERIALIZABLE")


def mysql_problems(connection: BaseDatabaseWrapper) -> list[str]:
    """Why weft's tables on this MySQL/MariaDB connection cannot be fenced (empty: fine).

    InnoDB tables (MyISAM and Aria have no transactions or row locks: a fenced
    write could half-commit), an isolation level of READ COMMITTED or stronger
    (Django's default), and text columns in the binary collation of migration
    0005 (the server defaults make "Order-1" and "order-1" one workflow id).
    """
    tables = [model._meta.db_table for model in apps.get_app_config("weft_django").get_models()]
    marks = ", ".join(["%s"] * len(tables))
    variable = "tx_isolation" if is_mariadb(connection) else "transaction_isolation"
    collation = mysql_collation(connection)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES "
            f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({marks}) "
            "AND ENGINE <> 'InnoDB' ORDER BY TABLE_NAME",
            tables,
        )
        engines = cursor.fetchall()
        cursor.execute(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS "
            f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({marks}) "
            "AND DATA_TYPE IN ('char', 'varchar') AND COLLATION_NAME <> %s "
            "ORDER BY TABLE_NAME, COLUMN_NAME",
            [*tables, collation],
        )
        collations = cursor.fetchall()
        cursor.execute(f"SELECT @@SESSION.{variable}")
        isolation = str(cursor.fetchone()[0]).upper().replace(" ", "-")
    problems = []
    if engines:
        listed = ", ".join(f"{table} ({engine})" for table, engine in engines)
        problems.append(
            f"These tables do not use InnoDB, the storage engine with transactions and "
            f"row locks that fencing needs: {listed}. Convert each one with "
            "'ALTER TABLE <table> ENGINE=InnoDB', and make InnoDB the default_storage_engine."
        )
    if isolation not in MYSQL_ISOLATION_LEVELS:
        problems.append(
            f"The session's isolation level is {isolation}, whose reads see uncommitted "
            "rows; use READ COMMITTED (Django's default: remove the 'isolation_level' "
            "option), REPEATABLE READ or SERIALIZABLE."
        )
    if collations:
        listed = ", ".join(f"{table}.{column}" for table, column in collations)
        problems.append(
            f"These columns are not in collation {collation}, so ids and names in them "
            f"do not compare exactly: {listed}. "
            "Run 'manage.py migrate weft_django' (migration 0005 converts them)."
        )
    return problems


def _table() -> str:
    return OwnershipMarker._meta.db_table


def raw_marker(*, using: str | None = None) -> tuple[Any, Any, Any] | None:
    """The marker row exactly as stored, never decoded: ``(mode, established_at,
    established_by)``, or None when there is none."""
    connection = connections[db_for(using)]
    quote = connection.ops.quote_name
    established = quote("established_at")
    if connection.vendor == "sqlite":
        # Django's sqlite3 backend registers a converter for "datetime" columns
        # that raises ValueError on a well-formed but impossible timestamp
        # ("2024-13-45 ...") and turns garbage into None: read the stored text
        # as is, so every undecodable value is reported as corruption, verbatim.
        established = f"CAST({established} AS TEXT)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('mode')}, {established}, {quote('established_by')} "
            f"FROM {quote(_table())} WHERE {quote('id')} = 1"
        )
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1], row[2])


def read_marker(*, using: str = "default") -> MarkerState | None:
    """The marker as stored, decoded; raises when it cannot be decoded."""
    row = raw_marker(using=using)
    if row is None:
        return None
    raw_mode, raw_established, _by = row
    try:
        established_at = as_aware(raw_established)
    except (TypeError, ValueError, AttributeError):
        established_at = None
    if raw_mode not in MODES or established_at is None:
        raise OwnershipMarkerCorruptError(
            f"The ownership-mode marker (table {_table()}, id=1) cannot be decoded: "
            f"mode={raw_mode!r}, established_at={raw_established!r}. weft_django never "
            "overwrites it. To repair: stop every engine on this database, then run "
            "'manage.py weft_marker --reset --mode <mode>' (or delete that row), and start "
            "the engines again; the first one re-establishes the mode."
        )
    return MarkerState(raw_mode, established_at, established_now=False)


def establish_or_match_marker(
    mode: str, *, using: str = "default", engine_id: str = ""
) -> MarkerState:
    """Gate 2: insert the marker if absent (first engine wins), else match it."""
    state = read_marker(using=using)
    if state is None:
        now = db_now(using)
        try:
            with transaction.atomic(using=using):
                OwnershipMarker.objects.using(using).create(
                    id=1, mode=mode, established_at=now, established_by=engine_id[:64]
                )
        except IntegrityError:
            state = read_marker(using=using)
            if state is None:
                raise OwnershipMarkerDeletedError(
                    "Lost the race to establish the ownership-mode marker, and the marker "
                    "was gone when re-read: it was deleted concurrently. Make sure no "
                    "operator or script is deleting it while engines start, then start "
                    "this engine again."
                ) from None
        else:
            logger.info("established ownership mode %r on database %r", mode, using)
            return MarkerState(mode, now, established_now=True)
    if state.mode != mode:
        raise OwnershipModeMismatchError(mode, state.mode, state.established_at)
    return state


def run_boot_gates(
    settings: WeftSettings | None = None, *, using: str | None = None, engine_id: str = ""
) -> MarkerState:
    """All three gates, in order; returns the marker."""
    settings = settings or get_settings()  # gate 3: raises on incoherent timing
    using = db_for(using)
    check_capability(settings.ownership, using=using)
    return establish_or_match_marker(settings.ownership, using=using, engine_id=engine_id)


class MarkerResetRefused(WeftError):
    """The marker was left as it was: ``engines`` still have a live lease."""

    def __init__(self, engines: list[Engine]) -> None:
        self.engines = engines
        super().__init__(
            f"{len(engines)} engine(s) have a live lease: "
            + ", ".join(engine.id for engine in engines)
        )


def reset_marker(
    mode: str, *, timing: Timing, established_by: str = "", using: str | None = None
) -> MarkerState:
    """Replace the marker with ``mode``, established now on the database clock: the
    repair the boot gates point to, once every engine is stopped.

    In one transaction: the old row is deleted by raw SQL (it may not decode, so
    it is never loaded), the live engines are read (``timing`` judges their
    leases), and the new row is inserted; :class:`MarkerResetRefused` when any
    engine is live, with the marker unchanged.
    """
    if mode not in MODES:
        raise WeftConfigurationError(
            f"{mode!r} is not an ownership mode; use one of {', '.join(map(repr, MODES))}."
        )
    using = db_for(using)
    now = db_now(using)
    quote = connections[using].ops.quote_name
    with transaction.atomic(using=using):
        with connections[using].cursor() as cursor:
            cursor.execute(f"DELETE FROM {quote(_table())} WHERE {quote('id')} = 1")
        engines = list(live_engines(using=using, now=now, timing=timing))
        if engines:
            raise MarkerResetRefused(engines)
        OwnershipMarker.objects.using(using).create(
            id=1, mode=mode, established_at=now, established_by=established_by[:64]
        )
    logger.info("reset the ownership-mode marker to %r on database %r", mode, using)
    return MarkerState(mode, now, established_now=True)
