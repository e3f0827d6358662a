"""A cursor for the engine's hot statements: prepared where the connection allows.

Django binds parameters client-side on psycopg 3 (the values are written into
the statement text), so PostgreSQL parses and plans every execution anew, and
it disables psycopg's prepared statements by default (``prepare_threshold``
None) so that transaction-pooling connection poolers keep working. The
fenced checkpoint, park and finish run once per step and once per run: on
two CPUs, parsing and planning them was about half of the database's CPU
time per step (``bench/throughput.py``; docs/benchmarks.md).

:func:`hot_cursor` returns, on a PostgreSQL connection whose
``OPTIONS["prepare_threshold"]`` is set, a cursor bound server-side (values
sent apart from the text), which psycopg prepares once the connection has run
the same text that many times; PostgreSQL then reuses its plan. Anywhere else
(the default threshold of None, psycopg 2, SQLite, MySQL/MariaDB) it is
Django's ordinary cursor: nothing changes. Either way the cursor is Django's
wrapper (errors wrapped, ``execute_wrapper`` hooks run), and under ``DEBUG`` or
a query capture its statements are logged with their values, as Django's own
(a prepared execution leaves psycopg no statement text to log).
"""

from __future__ import annotations

from typing import Any

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


def hot_cursor(connection: Any) -> Any:
    """A cursor for a statement the engine runs per step or per run (see the module)."""
    if not prepares(connection):
        return connection.cursor()
    raw = psycopg.Cursor(connection.connection)
    if connection.queries_logged:
        return _LoggedHotCursor(raw, connection)
    return connection.make_cursor(raw)


class _LoggedHotCursor(CursorDebugWrapper):
    """Django's debug cursor, logging the statement composed with its values."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return CursorWrapper.execute(self, sql, params)
