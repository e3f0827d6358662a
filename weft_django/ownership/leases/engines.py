"""Engine rows: one per engine process, carrying the lease its claims live on."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime
from typing import Any

from ...conf import Timing, WeftSettings
from ...models import Engine, EngineKind, EngineStatus, db_for
from ..clock import db_now, seconds
from .state import live_engines


def new_engine_id() -> str:
    host = socket.gethostname().split(".")[0][:24]
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def engine_id_or_new(engine_id: str | None) -> str:
    """``engine_id``, or a fresh one when None. An empty (or blank) id is
    refused with a ValueError: claim holders are compared by id, and no engine
    may share an id with another, nor with "no holder"."""
    if engine_id is None:
        return new_engine_id()
    if not isinstance(engine_id, str) or not engine_id.strip():
        raise ValueError(f"an engine id must be a non-blank string, not {engine_id!r}")
    return engine_id


def register_engine(
    settings: WeftSettings,
    *,
    timing: Timing | None = None,
    kind: str = EngineKind.WORKER,
    engine_id: str | None = None,
    using: str | None = None,
    now: datetime | None = None,
    workflows: dict[str, list[int]] | None = None,
) -> Engine:
    """Insert this process's engine row with a fresh lease of ``timing.ttl``
    (default: the claim timing of ``settings``) and the workflows it serves
    (``name -> versions``)."""
    using = db_for(using)
    timing = timing or settings.claim_timing
    now = now or db_now(using)
    return Engine.objects.using(using).create(
        id=engine_id_or_new(engine_id),
        hostname=socket.gethostname()[:255],
        pid=os.getpid(),
        kind=kind,
        ownership_mode=settings.ownership,
        status=EngineStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
        lease_expires_at=now + seconds(timing.ttl),
        workflows=workflows or {},
    )


def mark_disposing(engine_id: str, *, using: str | None = None) -> None:
    Engine.objects.using(db_for(using)).filter(id=engine_id, status=EngineStatus.RUNNING).update(
        status=EngineStatus.DISPOSING
    )


def mark_stopped(engine_id: str, *, using: str | None = None) -> None:
    """Stopped, and its lease ended now: nothing it held can count as live."""
    using = db_for(using)
    now = db_now(using)
    Engine.objects.using(using).filter(id=engine_id).update(
        status=EngineStatus.STOPPED, stopped_at=now, lease_expires_at=now
    )


def other_live_engines(engine_id: str, *, timing: Timing, using: str | None = None) -> list[Engine]:
    """Engines other than ``engine_id`` whose lease is live on the database clock."""
    return list(live_engines(using=using, timing=timing).exclude(id=engine_id))


def record_passes(
    engine_id: str, summaries: dict[str, dict[str, Any]], *, using: str | None = None
) -> None:
    """Store the last summary of each pass on the engine row (the admin shows them)."""
    Engine.objects.using(db_for(using)).filter(id=engine_id).update(passes=summaries)
