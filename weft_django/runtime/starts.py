"""Starting runs: one statement per start (or per chunk of a bulk start), its
wake-up in the same transaction.

Every way of creating a top-level run (``weft.start``, ``weft.start_many``,
the Tasks backend's ``enqueue``) validates its values into :class:`NewRun`
rows first and hands them to :func:`insert_runs`, the one place that writes
them. The statement is hand-written SQL per database (the ORM's insert costs
more client CPU than the work), and it skips an id that exists without
raising, so a duplicate never breaks the caller's transaction:

- PostgreSQL: ``INSERT ... ON CONFLICT DO NOTHING RETURNING id``, with the
  wake-up folded in (``WITH ins AS (INSERT ...) SELECT ..., pg_notify(...)``):
  outside a transaction the start is one statement and one commit; inside the
  caller's ``atomic()`` the first start of the transaction carries its
  ``NOTIFY`` (delivered on commit, discarded with a rollback) and the others
  none (:func:`~weft_django.runtime.wakeups.fold_notify`).
- SQLite: ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` (a worker's
  change watch sees the commit).
- MariaDB/MySQL: a plain ``INSERT``. A duplicate key fails only that
  statement (InnoDB rolls back the statement, not the transaction); the
  duplicate is then told apart from any other refusal (``INSERT IGNORE``
  would hide those too) and, for a chunk, its rows are inserted one by one.

The database's clock stamps ``created_at``; it is read first only when a
run's start time or execution timeout needs it (one more statement).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connections, transaction

from ..models import RunStatus, WorkflowRun
from ..ownership import NOW_SQL, db_now
from .payload import check_id, check_start_at, encode_call_text
from .registry import WorkflowDefinition
from .runs import Flow, is_duplicate_key
from .wakeups import CHANNEL, fold_notify, notified

#: The columns a new run is written with, in order; the others are NULL.
COLUMNS = (
    "id",
    "workflow_name",
    "workflow_version",
    "status",
    "args",
    "kwargs",
    "parent_id",
    "created_at",
    "updated_at",
    "start_at",
    "wake_at",
    "timeout_at",
    "queue",
    "priority",
    "concurrency_key",
)
#: Rows of one bulk statement (fewer where the database takes fewer parameters).
CHUNK = 1000
#: Parameters per row: every column but status and the two clock stamps (the
#: stamps too when the clock was read first: :data:`STAMPED_PARAMS_PER_ROW`).
PARAMS_PER_ROW = len(COLUMNS) - 3
STAMPED_PARAMS_PER_ROW = len(COLUMNS) - 1


@dataclass(frozen=True, slots=True)
class NewRun:
    """The validated values of a new pending run (what :func:`insert_runs` writes).

    ``args`` and ``kwargs`` are JSON text already checked by the payload rules
    (:func:`~weft_django.runtime.payload.encode_call_text`); ``start_at`` is
    aware or None; ``timeout`` is the definition's execution timeout (seconds);
    ``queue``, ``priority`` and ``concurrency_key`` its flow control, checked."""

    id: str
    workflow_name: str
    workflow_version: int
    args: str
    kwargs: str
    start_at: datetime | None = None
    timeout: float | None = None
    parent_id: str = ""
    queue: str = "default"
    priority: int = 0
    concurrency_key: str | None = None


def prepare_run(
    definition: WorkflowDefinition,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    workflow_id: str | None = None,
    start_at: datetime | None = None,
    flow: Flow | None = None,
) -> NewRun:
    """Validate a start (arguments bound against the workflow, id, start time,
    payloads) into a :class:`NewRun`; raises the typed error of the first
    problem (``WorkflowArgumentsError``, ``InvalidIdError``, ``PayloadError``,
    ``ValueError``/``TypeError`` for ``start_at``) before anything is written.
    ``flow`` is the run's checked flow control (default: the workflow's queue)."""
    definition.check_arguments(args, kwargs)
    workflow_id = check_id(workflow_id) if workflow_id is not None else uuid.uuid4().hex
    start_at = check_start_at(start_at, definition.timeout)
    args_text, kwargs_text = encode_call_text(args, kwargs, f"workflow {definition.name!r}")
    return NewRun(
        workflow_id,
        definition.name,
        definition.version,
        args_text,
        kwargs_text,
        start_at,
        definition.timeout,
        queue=flow.queue if flow is not None else definition.queue or "default",
        priority=flow.priority if flow is not None else 0,
        concurrency_key=flow.concurrency_key if flow is not None else None,
    )


def insert_runs(rows: Sequence[NewRun], *, using: str) -> list[str]:
    """Insert pending runs (distinct ids), skipping every id that exists;
    returns the ids inserted, in the order given.

    One statement per :data:`CHUNK` rows (a clock read first when a row needs
    it), with one wake-up for all of them. Several chunks are written in one
    transaction (the caller's, or one of their own): all or nothing. Any
    refusal other than a duplicate id raises, nothing written."""
    if not rows:
        return []
    connection = connections[using]
    size = chunk_size(connection)
    if len(rows) <= size:
        return _insert_chunk(connection, rows)
    inserted: list[str] = []
    with transaction.atomic(using=using):
        for begin in range(0, len(rows), size):
            inserted += _insert_chunk(connection, rows[begin : begin + size])
    return inserted


def chunk_size(connection: Any) -> int:
    limit = connection.features.max_query_params
    return min(CHUNK, limit // STAMPED_PARAMS_PER_ROW) if limit else CHUNK


def _insert_chunk(connection: Any, rows: Sequence[NewRun]) -> list[str]:
    using = connection.alias
    now = None
    if any(row.start_at is not None or row.timeout is not None for row in rows):
        now = db_now(using)
    adapt = connection.ops.adapt_datetimefield_value
    # The clock read stamps the rows too (their deadlines count from it).
    stamp = [adapt(now)] * 2 if now is not None else []
    params: list[Any] = []
    for row in rows:
        wake_at = timeout_at = None
        if now is not None:
            scheduled = row.start_at is not None and row.start_at > now
            if scheduled:
                wake_at = row.start_at
            if row.timeout is not None:
                begins = row.start_at if scheduled and row.start_at is not None else now
                timeout_at = begins + timedelta(seconds=row.timeout)
        params += (
            row.id,
            row.workflow_name,
            row.workflow_version,
            row.args,
            row.kwargs,
            row.parent_id,
            *stamp,
            adapt(row.start_at) if row.start_at is not None else None,
            adapt(wake_at) if wake_at is not None else None,
            adapt(timeout_at) if timeout_at is not None else None,
            row.queue,
            row.priority,
            row.concurrency_key,
        )
    vendor = connection.vendor
    stamped = now is not None
    if vendor == "mysql":
        return _insert_mysql(connection, rows, params, stamped)
    notify = vendor == "postgresql" and fold_notify(using)
    returning = connection.features.can_return_rows_from_bulk_insert
    if not returning and len(rows) > 1:  # an old SQLite: one row per statement
        inserted: list[str] = []
        with transaction.atomic(using=using):
            for row in rows:
                inserted += _insert_chunk(connection, [row])
        return inserted
    sql = insert_sql(vendor, len(rows), notify=notify, returning=returning, stamped=stamped)
    if vendor == "postgresql" and len(rows) > 1:  # one array per column (unnest)
        width = STAMPED_PARAMS_PER_ROW if stamped else PARAMS_PER_ROW
        params = [params[column::width] for column in range(width)]
    if notify:
        params.append(CHANNEL)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if returning:
            written = {run_id for run_id, *_ in cursor.fetchall()}
        else:
            written = {rows[0].id} if cursor.rowcount == 1 else set()
    if notify and written:
        notified(using)
    return [row.id for row in rows if row.id in written]


def _insert_mysql(
    connection: Any, rows: Sequence[NewRun], params: list[Any], stamped: bool
) -> list[str]:
    """A plain INSERT; on a duplicate id (that statement alone rolled back),
    each row of the chunk on its own, the duplicates skipped."""
    sql = insert_sql("mysql", len(rows), notify=False, returning=False, stamped=stamped)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        return [row.id for row in rows]
    except IntegrityError as exc:
        if not is_duplicate_key(exc):
            raise
    if len(rows) == 1:
        return []
    width = STAMPED_PARAMS_PER_ROW if stamped else PARAMS_PER_ROW
    inserted: list[str] = []
    with transaction.atomic(using=connection.alias):
        for index, row in enumerate(rows):
            one = params[index * width : (index + 1) * width]
            inserted += _insert_mysql(connection, [row], one, stamped)
    return inserted


@functools.cache
def insert_sql(
    vendor: str, count: int, *, notify: bool, returning: bool, stamped: bool = False
) -> str:
    """The INSERT of ``count`` new runs on ``vendor`` (cached per shape);
    ``stamped``: ``created_at``/``updated_at`` are parameters (the clock read
    first), else the database's now in the statement."""
    table = WorkflowRun._meta.db_table
    quote = connections_quote(vendor)
    # The database's now, the same for both stamps (PostgreSQL's clock_timestamp()
    # would differ between them; MySQL's and SQLite's are fixed per statement).
    now = "statement_timestamp()" if vendor == "postgresql" else NOW_SQL.get(vendor, "")
    now = (now or "CURRENT_TIMESTAMP").replace("%", "%%")  # not a parameter
    stamps = "%s, %s" if stamped else f"{now}, {now}"
    json = "%s::jsonb" if vendor == "postgresql" else "%s"
    pending = RunStatus.PENDING.value
    insert = f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in COLUMNS)}) "
    if vendor == "postgresql" and count > 1:
        # A column per array parameter: 12 parameters, not 12 per row; planned in
        # a fraction of a millisecond where a VALUES list of 1,000 rows takes tens.
        stamp_columns = ("u.c, u.u", "%s::timestamptz[], %s::timestamptz[], ", "c, u, ")
        if not stamped:
            stamp_columns = (f"{now}, {now}", "", "")
        insert += (
            f"SELECT u.i, u.n, u.v, '{pending}', u.a::jsonb, u.k::jsonb, u.p, "
            f"{stamp_columns[0]}, u.s, u.w, u.t, u.q, u.r, u.y FROM unnest(%s::text[], "
            f"%s::text[], %s::int[], %s::text[], %s::text[], %s::text[], {stamp_columns[1]}"
            "%s::timestamptz[], %s::timestamptz[], %s::timestamptz[], %s::text[], "
            "%s::smallint[], %s::text[]) "
            f"AS u(i, n, v, a, k, p, {stamp_columns[2]}s, w, t, q, r, y)"
        )
    else:
        values = f"(%s, %s, %s, '{pending}', {json}, {json}, %s, {stamps}, %s, %s, %s, %s, %s, %s)"
        insert += f"VALUES {', '.join([values] * count)}"
    if vendor == "mysql":
        return insert
    insert += " ON CONFLICT DO NOTHING"
    if not returning:
        return insert
    insert += f" RETURNING {quote('id')}"
    if not notify:
        return insert
    # The one wake-up of the statement, sent only when a row was inserted (a
    # CASE evaluates its THEN only for the row it picks).
    return (
        f"WITH ins AS ({insert}) SELECT ins.id, CASE WHEN ins.id = (SELECT min(id) FROM ins) "
        f"THEN pg_notify(%s, ins.id) END IS NULL FROM ins"
    )


def connections_quote(vendor: str) -> Callable[[str], str]:
    if vendor == "mysql":
        return lambda name: f"`{name}`"
    return lambda name: f'"{name}"'
