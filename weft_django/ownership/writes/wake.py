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
only if it holds. Other databases have no such form
(:func:`~.requests.forms_on`): they use the fenced transaction.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from ...models import WorkflowEvent, WorkflowRun, WorkflowSignal
from ...stored_json import load_stored_json
from .requests import EVENT_COLUMNS, Fence, Form, NoOneStatementForm, SignalTake, TakeSignal
from .single import add_events, fence_cte


def fenced_take_signal(using: str, fence: Fence, take: TakeSignal) -> SignalTake:
    """Consume the oldest unconsumed signal ``take.name`` of the run and record
    it as event ``take.seq``, after the turn's pending event ``take.rows``, in
    one statement; ``take.mark_running`` also moves the run to ``running``
    (its first write of the turn). Nothing is written unless ``fence`` holds
    *and* a signal was taken. A signal consumed concurrently shows as not
    taken (the caller looks again the slow way). Databases without this form:
    :class:`~.requests.NoOneStatementForm`."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        raise NoOneStatementForm(Form.TAKE_SIGNAL, connection.vendor)
    quote = connection.ops.quote_name
    signal_table = quote(WorkflowSignal._meta.db_table)
    event_table = quote(WorkflowEvent._meta.db_table)
    run_table = quote(WorkflowRun._meta.db_table)
    columns = ", ".join(quote(column) for column in EVENT_COLUMNS)
    stamp, stamp_params = take.stamp.sql_and_params()
    workflow_id = fence.workflow_id
    parts = [
        fence_cte(connection),
        f"take AS (UPDATE {signal_table} SET consumed_at = {stamp}, consumed_seq = %s "
        f"WHERE id = (SELECT s.id FROM {signal_table} s WHERE s.run_id = %s AND s.name = %s "
        "AND s.consumed_at IS NULL ORDER BY s.id LIMIT 1) "
        "AND consumed_at IS NULL AND EXISTS (SELECT 1 FROM fence) RETURNING payload)",
    ]
    params: list[Any] = [*fence.params(), *stamp_params, take.seq, workflow_id, take.name]
    add_events(connection, parts, params, take.rows, "CROSS JOIN take")
    parts.append(
        f"sig AS (INSERT INTO {event_table} ({columns}) SELECT %s, %s, 'signal', %s, "
        "take.payload, NULL, %s, %s, %s FROM take)"
    )
    params.extend(
        [workflow_id, take.seq, take.name[:255], fence.engine_id, fence.epoch, take.created_at]
    )
    if take.mark_running:
        parts.append(
            f"upd AS (UPDATE {run_table} SET status = 'running', "
            f"started_at = COALESCE(started_at, {stamp}), updated_at = {stamp}, "
            "waiting_on = NULL, wake_at = %s WHERE id = %s AND EXISTS (SELECT 1 FROM take))"
        )
        params.extend([*stamp_params * 2, take.wake_at, workflow_id])
    sql = (
        ", ".join(parts) + " SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM take), "
        "(SELECT payload FROM take)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        held, taken, payload = cursor.fetchone()
    # Django reads jsonb as its text (JSONField decodes it): so does this.
    return SignalTake(held == 1, taken == 1, None if payload is None else load_stored_json(payload))
