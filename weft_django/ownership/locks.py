"""Bounded lock waits, and lock failures told apart from other database errors.

A run's owner holds a lock on its claim row while it writes (PostgreSQL:
``FOR SHARE`` for the length of a fenced transaction, which for a
``transactional=True`` step includes the user's own code). A takeover, a
revocation or an operator's transition must wait for that lock; an owner
frozen inside its transaction would make them wait forever. So every such
statement runs under a bounded lock wait (PostgreSQL ``lock_timeout``,
MySQL/MariaDB ``innodb_lock_wait_timeout``): past it, a background pass skips the
run and tries again on its next pass, and an operator call raises
:class:`~weft_django.exceptions.WorkflowBusyError` having changed nothing. The
frozen owner's session itself is ended by the server
(PostgreSQL ``idle_in_transaction_session_timeout``, MariaDB
``idle_transaction_timeout``, set on every worker connection from
``WEFT["IDLE_IN_TRANSACTION_TIMEOUT"]``), which releases its locks.

SQLite has one write lock for the whole database: a writer that cannot get it
within the connection's busy timeout fails with "database is locked", which
the public verbs report as :class:`~weft_django.exceptions.StoreBusyError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import OperationalError, connections

from ..exceptions import StoreBusyError, WorkflowBusyError

#: How long a background pass waits for a row lock before skipping the run.
PASS_LOCK_WAIT = 1.0
#: How long an operator's cancel / suspend / resume / purge waits for the run's locks.
OPERATOR_LOCK_WAIT = 2.0

# PostgreSQL's lock_not_available (what lock_timeout raises); MySQL/MariaDB's
# ER_LOCK_WAIT_TIMEOUT; SQLite's busy database.
_LOCK_NOT_AVAILABLE = "55P03"
MYSQL_LOCK_WAIT_TIMEOUT = 1205
_LOCKED_MESSAGES = ("database is locked", "database table is locked")


def is_lock_failure(error: BaseException) -> bool:
    """A lock that could not be had in time (not a refused or failed statement)."""
    if not isinstance(error, OperationalError):
        return False
    cause = error.__cause__ or error
    if getattr(cause, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
        return True
    if getattr(cause, "args", None) and cause.args[0] == MYSQL_LOCK_WAIT_TIMEOUT:
        return True
    text = str(error).lower()
    return any(message in text for message in _LOCKED_MESSAGES)


@contextmanager
def bounded_lock_wait(using: str, seconds: float) -> Iterator[None]:
    """Statements in this block wait at most ``seconds`` for a row lock.

    PostgreSQL: ``lock_timeout``, local to the transaction this block must run
    in. MySQL/MariaDB: the session's ``innodb_lock_wait_timeout`` (whole seconds,
    at least 1), restored when the block ends. SQLite: a no-op (its busy timeout
    is the connection's)."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('lock_timeout')")
            previous = cursor.fetchone()[0]
            cursor.execute(
                "SELECT set_config('lock_timeout', %s, true)", [f"{int(seconds * 1000)}ms"]
            )
        yield
        # Only reached when the block succeeded (an error rolls the setting back with it).
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])
    elif connection.vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@SESSION.innodb_lock_wait_timeout")
            previous = cursor.fetchone()[0]
            cursor.execute("SET SESSION innodb_lock_wait_timeout = %s", [max(1, round(seconds))])
        try:
            yield
        finally:
            # A session setting, not the transaction's: restore it even when the
            # block failed (on the raw connection: Django refuses queries inside an
            # atomic block that had an error until it ends).
            with connection.connection.cursor() as cursor:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = %s", [previous])
    else:
        yield


@contextmanager
def busy_as_typed_error(workflow_id: str | None = None) -> Iterator[None]:
    """Report a lock failure as :class:`StoreBusyError` (or, for one run,
    :class:`WorkflowBusyError`) instead of a raw ``OperationalError``."""
    try:
        yield
    except OperationalError as exc:
        if not is_lock_failure(exc):
            raise
        if workflow_id is not None:
            raise WorkflowBusyError(workflow_id) from exc
        raise StoreBusyError(
            "The database is busy: another process holds the lock this write needs "
            f"({exc}). Nothing was written; try again."
        ) from exc
