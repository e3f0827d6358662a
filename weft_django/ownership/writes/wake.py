"""The fenced writes of a woken turn, each as one statement (PostgreSQL).

A turn woken by a signal consumes the signal (the wake hint it answers is
cleared by its park,
:func:`~weft_django.ownership.writes.single.fenced_write_many`). As a fenced
transaction that is six round trips (begin with the locking read of the claim,
the writes, commit); under load every round trip waits its turn at the
database, and they all sit between the ``signal()`` and the run's next step.
Here it is one statement that proves the claim the way
:func:`~weft_django.ownership.writes.single.fenced_insert` does (a ``FOR
SHARE`` read of the claim in a CTE, which a takeover must wait for) and writes
only if it holds. Other databases get None and use the fenced transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections

from ...models import WorkflowEvent, WorkflowRun, WorkflowSignal
from ...stored_json import load_stored_json
from .single import EVENT_COLUMNS, add_events, fence_cte, stamp_sql


@dataclass(frozen=True)
class SignalTake:
    """What :func:`fenced_take_signal` did: ``held`` the claim (else nothing was
    written); ``taken`` the oldest unconsumed signal of the name, whose
    ``payload`` is then recorded as the ``signal`` event."""

    held: bool
    taken: bool
    payload: Any = None


def fenced_take_signal(
    using: str,
    *,
    workflow_id: str,
    engine_id: str,
    epoch: int,
    name: str,
    seq: int,
    rows: list[tuple[Any, ...]],
    created_at: datetime,
    running_since: tuple[datetime | None] | None,
    stamp: str | None,
    now: Callable[[], datetime],
) -> SignalTake | None:
    """Consume the oldest unconsumed signal ``name`` of the run and record it as
    event ``seq``, after the turn's pending event ``rows`` (EVENT_COLUMNS order,
    JSON as text), in one statement; ``running_since=(wake_at,)`` also moves the
    run to ``running`` (its first write of the turn). Nothing is written unless
    the claim holds *and* a signal was taken. None on databases without this
    form. A signal consumed concurrently shows as not taken (the caller looks
    again the slow way)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    quote = connection.ops.quote_name
    signal_table = quote(WorkflowSignal._meta.db_table)
    event_table = quote(WorkflowEvent._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
    stamp, stamp_params = stamp_sql(stamp, now)
    parts = [
        fence_cte(connection),
        f"take AS (UPDATE {signal_table} SET consumed_at = {stamp}, consumed_seq = %s "
        f"WHERE id = (SELECT s.id FROM {signal_table} s WHERE s.run_id = %s AND s.name = %s "
        "AND s.consumed_at IS NULL ORDER BY s.id LIMIT 1) "
        "AND consumed_at IS NULL AND EXISTS (SELECT 1 FROM fence) RETURNING payload)",
    ]
    params: list[Any] = [workflow_id, engine_id, epoch, *stamp_params, seq, workflow_id, name]
    add_events(connection, parts, params, rows, "CROSS JOIN take")
    parts.append(
        f"sig AS (INSERT INTO {event_table} ({columns}) SELECT %s, %s, 'signal', %s, "
        "take.payload, NULL, %s, %s, %s FROM take)"
    )
    params.extend([workflow_id, seq, name[:255], engine_id, epoch, created_at])
    if running_since is not None:
        parts.append(
            f"upd AS (UPDATE {run_table} SET status = 'running', "
            f"started_at = COALESCE(started_at, {stamp}), updated_at = {stamp}, "
            "waiting_on = NULL, wake_at = %s WHERE id = %s AND EXISTS (SELECT 1 FROM take))"
        )
        params.extend([*stamp_params * 2, running_since[0], workflow_id])
    sql = (
        ", ".join(parts) + " SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM take), "
        "(SELECT payload FROM take)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        held, taken, payload = cursor.fetchone()
    # Django reads jsonb as its text (JSONField decodes it): so does this.
    return SignalTake(held == 1, taken == 1, None if payload is None else load_stored_json(payload))
