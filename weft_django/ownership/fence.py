"""Fenced writes: a transaction that first proves this engine still owns the run.

The proof is a row lock on the claim (PostgreSQL: ``FOR SHARE``, which any
takeover or revocation UPDATE must wait for) or, on databases without row
locks, a no-op conditional UPDATE that takes the write lock. Either way the
check and every write after it commit together or not at all; a failed check
raises :class:`~weft_django.exceptions.EngineDeposedError` and rolls back
everything done inside the block, user ORM writes included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction
from django.db.models import F

from ..conf import MODE_LEASE, MODE_NONE
from ..exceptions import EngineDeposedError
from ..models import Claim, GlobalLease


def _check(
    using: str,
    model: type[Claim] | type[GlobalLease],
    key: str,
    value: object,
    engine_id: str,
    epoch: int,
) -> bool:
    connection = connections[using]
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(model._meta.db_table)
        column = connection.ops.quote_name(model._meta.get_field(key).column)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {table} WHERE {column} = %s AND holder_id = %s "
                "AND epoch = %s FOR SHARE",
                [value, engine_id, epoch],
            )
            return cursor.fetchone() is not None
    filters = {key: value, "holder_id": engine_id, "epoch": epoch}
    return model.objects.using(using).filter(**filters).update(epoch=F("epoch")) == 1


@contextmanager
def fenced(
    workflow_id: str,
    *,
    engine_id: str,
    epoch: int,
    mode: str,
    using: str = "default",
) -> Iterator[None]:
    """``with fenced(...):`` run writes that only the current owner may commit.

    ``epoch`` is the claim epoch (mode ``workflow-lease``) or the global lease
    epoch (mode ``lease``); mode ``none`` only opens a transaction.
    """
    with transaction.atomic(using=using):
        if mode == MODE_LEASE:
            ok = _check(using, GlobalLease, "id", 1, engine_id, epoch)
        elif mode == MODE_NONE:
            ok = True
        else:
            ok = _check(using, Claim, "workflow_id", workflow_id, engine_id, epoch)
        if not ok:
            raise EngineDeposedError(workflow_id)
        yield
