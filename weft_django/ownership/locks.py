"""Bounded lock waits, and lock failures told apart from other database errors.

A run's owner holds a lock on its claim row while it writes (PostgreSQL:
``FOR SHARE`` for the length of a fenced transaction, which for a
``transactional=True`` step includes the user's own code). A takeover, a
revocation or an operator's transition must wait for that lock; an owner
frozen inside its transaction would make them wait forever. So every such
statement runs under a bounded lock wait (PostgreSQL ``lock_timeout``): past
it, a background pass skips the run and tries again on its next pass, and an
operator call raises :class:`~weft_django.exceptions.WorkflowBusyError` having
changed nothing. The frozen owner's session itself is ended by the server
(``idle_in_transaction_session_timeout``, set on every worker connection from
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

# PostgreSQL's lock_not_available (what lock_timeout raises).
_LOCK_NOT_AVAILABLE = "55P03"
_LOCKED_MESSAGES = ("database is locked", "database table is locked")


def is_lock_failure(error: BaseException) -> bool:
    """A lock that could not be had in time (not a refused or failed statement)."""
    if not isinstance(error, OperationalError):
        return False
    cause = error.__cause__ or error
    if getattr(cause, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
        return True
    text = str(error).lower()
    return any(message in text for message in _LOCKED_MESSAGES)


@contextmanager
def bounded_lock_wait(using: str, seconds: float) -> Iterator[None]:
    """Statements in this block wait at most ``seconds`` for a lock (PostgreSQL; a
    no-op elsewhere). Run it inside a transaction: the bound is local to it."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('lock_timeout')")
        previous = cursor.fetchone()[0]
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{int(seconds * 1000)}ms"])
    yield
    # Only reached when the block succeeded (an error rolls the setting back with it).
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])


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
