"""Fenced writes: a transaction that first proves this engine still owns the run.

The proof is a locking read of the fence row (the run's claim, or the global
lease), held to commit, which any takeover or revocation UPDATE of that row
must wait for; a locking read always sees the latest committed row, so an
owner that lost the claim sees it. Databases without row locks (SQLite) run a
no-op conditional UPDATE that takes the write lock instead. Either way the
check and every write after it commit together or not at all; a failed check
raises :class:`~weft_django.exceptions.EngineDeposedError` and rolls back
everything done inside the block, user ORM writes included. The same proof
inside a single statement, for the hot writes: :mod:`.single`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction
from django.db.models import F

from ...exceptions import EngineDeposedError
from ...models import Claim, GlobalLease, db_for
from .requests import Fence

# The locking read that proves a fence row, per vendor and row. MySQL/MariaDB
# lock the claim exclusively: a fenced transaction may release the claim
# before it commits (the terminal commit), and upgrading a shared lock to that
# UPDATE deadlocks with a revocation already queued on the row. The global
# lease row is shared by every run of mode ``lease``: a shared lock, so the
# holder's turns do not queue behind each other. (MariaDB has no ``FOR SHARE``.)
LOCKING_READS = {
    "postgresql": {Claim: "FOR SHARE", GlobalLease: "FOR SHARE"},
    "mysql": {Claim: "FOR UPDATE", GlobalLease: "LOCK IN SHARE MODE"},
}


def _holds(
    using: str, model: type[Claim] | type[GlobalLease], key: str, value: str | int, fence: Fence
) -> bool:
    connection = connections[using]
    locking = LOCKING_READS.get(connection.vendor)
    if locking is not None:
        table = connection.ops.quote_name(model._meta.db_table)
        field = model._meta.get_field(key)  # the primary key: a concrete Field
        column = connection.ops.quote_name(getattr(field, "column", None) or key)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {table} WHERE {column} = %s AND holder_id = %s "
                f"AND epoch = %s {locking[model]}",
                [value, fence.engine_id, fence.epoch],
            )
            return cursor.fetchone() is not None
    filters = {key: value, "holder_id": fence.engine_id, "epoch": fence.epoch}
    return model.objects.using(using).filter(**filters).update(epoch=F("epoch")) == 1


@contextmanager
def fenced(fence: Fence, *, using: str | None = None) -> Iterator[None]:
    """``with fenced(fence):`` run writes that only the holder of the run's claim
    at the fence's epoch may commit."""
    using = db_for(using)
    with transaction.atomic(using=using):
        if not _holds(using, Claim, "workflow_id", fence.workflow_id, fence):
            raise EngineDeposedError(fence.workflow_id)
        yield


@contextmanager
def fenced_by_global_lease(fence: Fence, *, using: str | None = None) -> Iterator[None]:
    """The same, proven by the global lease of mode ``lease`` at the fence's epoch."""
    using = db_for(using)
    with transaction.atomic(using=using):
        if not _holds(using, GlobalLease, "id", 1, fence):
            raise EngineDeposedError(fence.workflow_id)
        yield
