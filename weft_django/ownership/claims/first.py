"""Epoch-1 claims inserted in one statement (one claim or a batch of them).

Shared by :class:`~weft_django.ownership.claims.registry.ClaimRegistry` (one workflow
id) and the intake (:mod:`weft_django.ownership.claims.intake`, a batch sized to the
free capacity).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models.constants import OnConflict

from ...models import Claim
from ..clock import NOW_SQL


def insert_first_claims(
    using: str, engine_id: str, workflow_ids: Sequence[str], *, stamp: datetime | None = None
) -> list[str]:
    """Epoch-1 claims for ``workflow_ids`` (ids that had no claim row when read),
    in one statement; returns the ids inserted. A row another engine inserted
    first is skipped by the database (``ON CONFLICT DO NOTHING``, ``INSERT OR
    IGNORE``, ``INSERT IGNORE``: Django's own per-vendor spelling).

    ``claimed_at`` is the database's own now inside the statement unless
    ``stamp`` (an injected test clock) is given. Where the database cannot
    return the inserted rows (MySQL), they are read back: a claim held by
    this engine at epoch 1 among ids that had no claim row can only be one
    this statement inserted.
    """
    if not workflow_ids:
        return []
    connection = connections[using]
    ops = connection.ops
    quote = ops.quote_name
    if stamp is not None:
        value, extra = "%s", [ops.adapt_datetimefield_value(stamp)]
    else:
        value, extra = NOW_SQL[connection.vendor].replace("%", "%%"), []
    rows = ", ".join([f"(%s, 1, %s, {value})"] * len(workflow_ids))
    params: list[Any] = []
    for workflow_id in workflow_ids:
        params += [workflow_id, engine_id, *extra]
    table = quote(Claim._meta.db_table)
    on_conflict = ops.on_conflict_suffix_sql([], OnConflict.IGNORE, [], [])
    returning = connection.features.can_return_rows_from_bulk_insert
    sql = (
        f"{ops.insert_statement(on_conflict=OnConflict.IGNORE)} {table} "
        f"(workflow_id, epoch, holder_id, claimed_at) VALUES {rows} {on_conflict}"
    )
    with connection.cursor() as cursor:
        if returning:
            cursor.execute(f"{sql} RETURNING workflow_id", params)
            return [row[0] for row in cursor.fetchall()]
        cursor.execute(sql, params)
        if cursor.rowcount == len(workflow_ids):
            return list(workflow_ids)
        if cursor.rowcount == 0:
            return []
    return list(
        Claim.objects.using(using)
        .filter(workflow_id__in=list(workflow_ids), holder_id=engine_id, epoch=1)
        .values_list("workflow_id", flat=True)
    )
