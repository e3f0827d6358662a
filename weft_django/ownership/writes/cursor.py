"""A cursor for the engine's hot statements: prepared where the connection allows.

Django binds parameters client-side on psycopg 3 (the values are written into
the statement text), so PostgreSQL parses and plans every execution anew, and
it disables psycopg's prepared statements by default (``prepare_threshold``
None) so that transaction-pooling connection poolers keep working. The
fenced checkpoint, park and finish run once per step and once per run, so
parsing and planning them is a large share of the database's CPU time per
step (docs/benchmarks.md, "Statement cost").

:func:`hot_cursor` returns, on a PostgreSQL connection whose
``OPTIONS["prepare_threshold"]`` is set, a cursor bound server-side (values
sent apart from the text), which psycopg prepares once the connection has run
the same text that many times; PostgreSQL then reuses its plan.

A plan that PostgreSQL reuses (its *generic* plan) is made for the tables as
they were when it was made, and kept while they grow: one made while the
claims table held a handful of rows scans it (or walks the holder's claims),
and in a burst every park would then cost more as runs park. The fenced
write keeps the holder index out of its plan (see
:func:`~weft_django.ownership.writes.single.write_many_statement`), and each
connection trusts its plans for at most :data:`REPLAN_INTERVAL` seconds:
then ``DISCARD PLANS`` drops the plans of its prepared statements, and their
next executions plan them again against the tables as they are. That costs
one statement and a few plannings per connection per interval, against
hundreds of executions. (Statistics gathered by ANALYZE also make PostgreSQL
plan again; autovacuum's come too late in a burst.) The statements
themselves stay prepared, so psycopg's record of them stays true. Dropping
them instead (``DEALLOCATE ALL``) is not safe: psycopg notices that command
only the first time a connection runs its text, and would go on executing
statements the server no longer has ("prepared statement ... does not
exist").

Anywhere else (the default threshold of None, psycopg 2, SQLite,
MySQL/MariaDB) it is Django's ordinary cursor: nothing changes. Either way
the cursor is Django's wrapper (errors wrapped, ``execute_wrapper`` hooks
run), and under ``DEBUG`` or a query capture its statements are logged with
their values, as Django's own (a prepared execution leaves psycopg no
statement text to log).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

from django.db import DatabaseError
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

try:
    import psycopg
    from django.db.backends.postgresql.psycopg_any import is_psycopg3
except ImportError:  # no psycopg 3: Django's cursor everywhere
    is_psycopg3 = False


def prepares(connection: Any) -> bool:
    """Whether ``connection`` (a Django connection) lets psycopg prepare statements."""
    if connection.vendor != "postgresql" or not is_psycopg3:
        return False
    connection.ensure_connection()
    return connection.connection.prepare_threshold is not None


#: Seconds one connection keeps the plans of its prepared statements.
REPLAN_INTERVAL = 5.0

# When each psycopg connection's current plans began (monotonic).
_planned_since: WeakKeyDictionary[Any, float] = WeakKeyDictionary()


def hot_cursor(connection: Any, *, clock: Callable[[], float] = time.monotonic) -> Any:
    """A cursor for a statement the engine runs per step or per run (see the module)."""
    if not prepares(connection):
        return connection.cursor()
    connection.validate_thread_sharing()
    _replan_when_due(connection, clock())
    raw = psycopg.Cursor(connection.connection)
    if connection.queries_logged:
        return _LoggedHotCursor(raw, connection)
    return _HotCursor(raw, connection)


def _replan_when_due(connection: Any, now: float) -> None:
    """Drop the plans of the connection's prepared statements once they are
    REPLAN_INTERVAL old (errors wrapped as Django's; not in the query log, so a
    statement count does not depend on when the interval ends)."""
    raw = connection.connection
    since = _planned_since.setdefault(raw, now)
    if now - since < REPLAN_INTERVAL:
        return
    _planned_since[raw] = now
    with connection.make_cursor(psycopg.Cursor(raw)) as cursor:
        cursor.execute("DISCARD PLANS")


class _HotCursor(CursorWrapper):
    """Django's cursor wrapper. When the server no longer has a statement that
    psycopg executes as prepared (SQLSTATE 26000: something dropped it behind
    psycopg's back, e.g. a pooler's ``DISCARD ALL``), the error is raised as
    any other and the connection is closed: the next use opens a fresh one,
    with nothing prepared, instead of every hot statement failing on this one."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        try:
            return super().execute(sql, params)
        except DatabaseError as exc:
            if isinstance(exc.__cause__, psycopg.errors.InvalidSqlStatementName):
                self.db.close()
            raise


class _LoggedHotCursor(CursorDebugWrapper, _HotCursor):
    """Django's debug cursor, logging the statement composed with its values."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return _HotCursor.execute(self, sql, params)
