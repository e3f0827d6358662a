"""What retention has to do: weft's table sizes and the oldest prunable run
(docs/retention.md; the admin overview renders :func:`summary`).

At most five statements however large the tables are. Table sizes come from
the catalog, as estimates: ``pg_class.reltuples`` (or, before the first
ANALYZE, ``pg_stat_user_tables.n_live_tup``) and ``pg_total_relation_size`` on
PostgreSQL, ``information_schema.TABLES`` on MariaDB/MySQL; a ``COUNT(*)``
capped at :data:`COUNT_CAP` rows and no size on SQLite. The oldest prunable
run and the number of prunable runs (capped at :data:`PRUNABLE_CAP`) come
from one index lookup per status on ``weft_run_finished_idx``. "Prunable" is
past its status's retention; a prune may still keep some of them (a live
parent, a held claim).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction

from ..models import (
    Claim,
    Engine,
    UpdateRequest,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
    db_for,
)
from ..ownership import as_aware, db_now
from .pruner import guard_plans
from .settings import RetentionPolicy, policy

#: ``prunable_runs`` counts at most this many (``prunable_capped`` says it stopped).
PRUNABLE_CAP = 10_000
#: Where there are no catalog estimates (SQLite), rows are counted up to this many.
COUNT_CAP = 1_000_000
#: The tables shown, in order.
MODELS = (WorkflowRun, WorkflowEvent, WorkflowSignal, UpdateRequest, Engine, Claim)


def _tables_postgresql(cursor: Any, names: list[str]) -> dict[str, tuple[int, int | None]]:
    """``reltuples`` (ANALYZE's estimate), or, for a table never analyzed (-1, e.g.
    right after a bulk load), the statistics collector's ``n_live_tup``."""
    marks = ", ".join(["%s"] * len(names))
    cursor.execute(
        "SELECT c.relname, CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint "
        "ELSE COALESCE(s.n_live_tup, 0) END, pg_total_relation_size(c.oid) "
        "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
        f"WHERE c.relname IN ({marks}) AND c.relkind = 'r' AND pg_table_is_visible(c.oid)",
        names,
    )
    return {name: (int(rows), int(size)) for name, rows, size in cursor.fetchall()}


def _quote(cursor: Any) -> Any:
    return cursor.db.ops.quote_name


def _tables_mysql(cursor: Any, names: list[str]) -> dict[str, tuple[int, int | None]]:
    marks = ", ".join(["%s"] * len(names))
    cursor.execute(
        "SELECT TABLE_NAME, TABLE_ROWS, DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES "
        f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({marks})",
        names,
    )
    return {name: (int(rows or 0), int(size or 0)) for name, rows, size in cursor.fetchall()}


def _tables_counted(cursor: Any, names: list[str]) -> dict[str, tuple[int, int | None]]:
    """SQLite keeps no row estimates: count, but stop at :data:`COUNT_CAP` rows a table
    (``rows_capped`` then says so), so a big store does not pay a full scan per view."""
    quote = _quote(cursor)
    cursor.execute(
        " UNION ALL ".join(
            f"SELECT %s, (SELECT COUNT(*) FROM (SELECT 1 FROM {quote(name)} LIMIT {COUNT_CAP + 1}))"
            for name in names
        ),
        names,
    )
    return {name: (int(rows), None) for name, rows in cursor.fetchall()}


def _cutoffs(retention: RetentionPolicy, now: datetime) -> dict[str, datetime]:
    return {
        status: now - timedelta(seconds=keep)
        for status, keep in retention.statuses.items()
        if keep is not None
    }


def summary(
    using: str | None = None, *, retention: RetentionPolicy | None = None
) -> dict[str, Any]:
    """Table sizes, the oldest run past its retention, and how many are (capped).

    ``{"tables": [{"table", "rows", "rows_capped", "bytes"}, ...], "oldest_prunable": None |
    {"pk", "workflow_id", "status", "finished_at"}, "prunable_runs": int,
    "prunable_capped": bool}``; ``bytes`` is None on SQLite.
    """
    using = db_for(using)
    retention = retention if retention is not None else policy()
    connection = connections[using]
    names = [model._meta.db_table for model in MODELS]
    readers = {"postgresql": _tables_postgresql, "mysql": _tables_mysql}
    reader = readers.get(connection.vendor, _tables_counted)
    cutoffs = _cutoffs(retention, db_now(using))
    with transaction.atomic(using=using), connection.cursor() as cursor:
        guard_plans(using)
        sizes = reader(cursor, names)
        oldest, prunable = _prunable(cursor, cutoffs)
    tables = [
        {
            "table": name,
            "rows": min(sizes.get(name, (0, None))[0], COUNT_CAP),
            "rows_capped": sizes.get(name, (0, None))[0] > COUNT_CAP,
            "bytes": sizes.get(name, (0, None))[1],
        }
        for name in names
    ]
    return {
        "tables": tables,
        "oldest_prunable": oldest,
        "prunable_runs": min(prunable, PRUNABLE_CAP),
        "prunable_capped": prunable > PRUNABLE_CAP,
    }


def _prunable(cursor: Any, cutoffs: dict[str, datetime]) -> tuple[dict[str, Any] | None, int]:
    """The oldest run past its cutoff, and the prunable runs counted up to the cap + 1."""
    if not cutoffs:
        return None, 0
    quote = _quote(cursor)
    ops = cursor.db.ops
    table = quote(WorkflowRun._meta.db_table)
    status, finished, pk = quote("status"), quote("finished_at"), quote("id")
    params: list[Any] = []
    oldest_parts, count_parts = [], []
    for name, cutoff in cutoffs.items():
        value = ops.adapt_datetimefield_value(cutoff)
        where = f"{status} = %s AND {finished} < %s"
        oldest_parts.append(
            f"SELECT * FROM (SELECT {pk}, {status}, {finished} FROM {table} WHERE {where} "
            f"ORDER BY {finished}, {pk} LIMIT 1) o"
        )
        count_parts.append(
            f"SELECT * FROM (SELECT 1 AS one FROM {table} WHERE {where} "
            f"ORDER BY {finished}, {pk} LIMIT {PRUNABLE_CAP + 1}) c"
        )
        params.extend([name, value])
    cursor.execute(
        f"SELECT * FROM ({' UNION ALL '.join(oldest_parts)}) u ORDER BY 3, 1 LIMIT 1", params
    )
    row = cursor.fetchone()
    oldest = None
    if row is not None:
        oldest = {
            "pk": row[0],
            "workflow_id": row[0],
            "status": row[1],
            "finished_at": as_aware(row[2]),
        }
    cursor.execute(f"SELECT COUNT(*) FROM ({' UNION ALL '.join(count_parts)}) n", params)
    return oldest, int(cursor.fetchone()[0])
