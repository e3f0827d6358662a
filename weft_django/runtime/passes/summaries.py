"""The last run of each Celery pass, one :class:`~weft_django.models.PassSummary`
row per pass kind (docs/celery.md), for the admin overview.

Every Celery pass (signal poll, update poll, prune) upserts its kind's row once,
at its end, also when it raised: a conditional ``UPDATE`` first, an ``INSERT``
only when no row exists yet (a racing first insert is retried as the update).
The table holds at most one row per :class:`~weft_django.models.PassKind`, so
it never grows however often beat runs the passes. Recording never raises over
the pass: a database error is logged.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F

from ...models import PassKind, PassSummary, db_for

logger = logging.getLogger("weft_django.pass_summaries")

#: Per-run failures kept on the row (the rest are counted in ``counts``).
MAX_FAILURES = 20
#: Characters of an error message kept.
MAX_ERROR = 2000


def describe_error(error: BaseException) -> str:
    """``"TypeName: message"``, cut to :data:`MAX_ERROR` characters."""
    return f"{type(error).__name__}: {error}"[:MAX_ERROR]


def record_pass(
    kind: PassKind | str,
    *,
    started_at: datetime,
    finished_at: datetime,
    counts: Mapping[str, Any],
    failures: Sequence[Mapping[str, Any]] = (),
    succeeded: bool = True,
    error: BaseException | str | None = None,
    engine_id: str = "",
    using: str | None = None,
) -> bool:
    """Upsert the row of ``kind`` with this pass; False when it could not be written
    (logged). ``error`` (the exception the pass raised) makes it unsuccessful
    and is kept in ``last_error`` until a later pass fails."""
    using = db_for(using)
    message = "" if error is None else error if isinstance(error, str) else describe_error(error)
    fields: dict[str, Any] = {
        "hostname": socket.gethostname()[:255],
        "pid": os.getpid(),
        "engine_id": engine_id,
        "started_at": started_at,
        "finished_at": finished_at,
        "succeeded": succeeded and not message,
        "counts": dict(counts),
        "failures": [dict(failure) for failure in list(failures)[:MAX_FAILURES]],
        "error": message,
    }
    if message:
        fields.update(last_error=message, last_error_at=finished_at)
    rows = PassSummary.objects.using(using)
    try:
        if rows.filter(kind=kind).update(passes=F("passes") + 1, **fields):
            return True
        try:
            with transaction.atomic(using=using):
                rows.create(kind=kind, passes=1, **fields)
        except IntegrityError:  # another pass of this kind inserted it first
            rows.filter(kind=kind).update(passes=F("passes") + 1, **fields)
        return True
    except DatabaseError as exc:
        logger.warning("could not record the summary of the %s pass: %s", kind, exc)
        return False


def record_store_pass(
    kind: PassKind | str,
    summary: Mapping[str, Any],
    *,
    started_at: datetime,
    finished_at: datetime,
    error: BaseException | None = None,
    using: str | None = None,
) -> bool:
    """Upsert ``kind``'s row from a store pass's JSON summary (``PassResult.summary``)."""
    return record_pass(
        kind,
        started_at=started_at,
        finished_at=finished_at,
        counts=summary.get("counts") or {},
        failures=summary.get("failures") or [],
        succeeded=bool(summary.get("succeeded", True)),
        error=error,
        engine_id=str(summary.get("engine_id") or ""),
        using=using,
    )
