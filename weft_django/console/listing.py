"""The console's reads: ``runs``, ``describe``, ``history``, ``engines``, ``stuck``.

``runs`` pages by keyset on the ``(created_at, id)`` order of the run indexes
(``weft_run_created_idx``; with a status or a workflow filter,
``weft_run_status_created_idx`` / ``weft_run_name_created_idx``): a page is
one bounded statement whatever the page's depth, and it prints the cursor of
the next page (opaque: the last row's creation time and id). ``history`` pages
by ``seq`` on the history's unique ``(run, seq)`` index. Nothing here writes.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import OuterRef, Q, Subquery
from django.utils.dateparse import parse_datetime

from ..api.reads import describe as describe_run
from ..conf import get_settings
from ..exceptions import WorkflowNotFoundError
from ..inspection.engines import claims_held
from ..inspection.stuck import stuck_runs
from ..inspection.timeline import describe as event_summary
from ..inspection.timeline import pending_for
from ..models import Claim, Engine, EngineStatus, WorkflowEvent, WorkflowRun, db_for
from ..ownership import db_now, ownership_for
from . import USAGE, ConsoleError

#: The most rows a page may ask for.
MAX_LIMIT = 1000
#: The last events ``describe`` shows.
LAST_EVENTS = 5
#: The retries, forks and children ``describe`` lists.
LINKS_LIMIT = 20
#: The engine id the ``stuck`` listing asks the ownership strategy under.
CONSOLE_ENGINE_ID = "weft-console"

RUN_COLUMNS = ["id", "workflow", "version", "status", "owner", "created_at", "updated_at", "origin"]


@dataclass
class Page:
    """Rows and the cursor of the next page (None: this is the last one)."""

    rows: list[dict[str, Any]]
    next_cursor: str | None

    def as_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "next_cursor": self.next_cursor}


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ConsoleError(f"--limit must be between 1 and {MAX_LIMIT}", USAGE)
    return limit


def encode_cursor(created_at: datetime, run_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, run_id = json.loads(raw)
        created_at = parse_datetime(stamp)
    except (ValueError, TypeError, binascii.Error):
        created_at = None
        run_id = None
    if created_at is None or not isinstance(run_id, str):
        raise ConsoleError(f"--cursor {cursor!r} is not a cursor this command printed", USAGE)
    return created_at, run_id


def runs(
    *,
    workflow: str | None = None,
    statuses: list[str] | None = None,
    owner: str | None = None,
    version: int | None = None,
    older_than: timedelta | None = None,
    newer_than: timedelta | None = None,
    limit: int = 50,
    cursor: str | None = None,
    using: str | None = None,
) -> Page:
    """Runs newest first, filtered, one page of ``limit`` after ``cursor``."""
    using = db_for(using)
    limit = check_limit(limit)
    rows = WorkflowRun.objects.using(using)
    if workflow:
        rows = rows.filter(workflow_name=workflow)
    if statuses:
        rows = rows.filter(status__in=statuses)
    if version is not None:
        rows = rows.filter(workflow_version=version)
    if owner:
        held = Claim.objects.using(using).filter(holder_id=owner).values("workflow_id")
        rows = rows.filter(pk__in=held)
    if older_than is not None or newer_than is not None:
        now = db_now(using)
        if older_than is not None:
            rows = rows.filter(created_at__lt=now - older_than)
        if newer_than is not None:
            rows = rows.filter(created_at__gte=now - newer_than)
    if cursor:
        created_at, run_id = decode_cursor(cursor)
        # The bound first (an index range: the scan starts at the cursor, not at
        # the newest run), then the tie on the creation time broken by id.
        rows = rows.filter(created_at__lte=created_at).filter(
            Q(created_at__lt=created_at) | Q(pk__lt=run_id)
        )
    holder = Subquery(Claim.objects.filter(workflow_id=OuterRef("pk")).values("holder_id")[:1])
    found = list(
        rows.annotate(owner=holder)
        .order_by("-created_at", "-pk")
        .values(
            "pk",
            "workflow_name",
            "workflow_version",
            "status",
            "owner",
            "created_at",
            "updated_at",
            "origin_id",
        )[: limit + 1]
    )
    page = [
        {
            "id": row["pk"],
            "workflow": row["workflow_name"],
            "version": row["workflow_version"],
            "status": row["status"],
            "owner": row["owner"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "origin": row["origin_id"],
        }
        for row in found[:limit]
    ]
    more = len(found) > limit
    next_cursor = encode_cursor(page[-1]["created_at"], page[-1]["id"]) if more else None
    return Page(page, next_cursor)


def describe(run_id: str, *, using: str | None = None) -> dict[str, Any]:
    """What ``weft.describe`` says, with the lease left, the run's links (its
    origin, its retries and forks, its children), its pending messages and its
    last events."""
    using = db_for(using)
    description = asdict(describe_run(run_id, using=using))
    now = db_now(using)
    expires = description["claim_expires_at"]
    run = WorkflowRun.objects.using(using).values("origin_id", "origin_step").get(pk=run_id)
    runs_of = WorkflowRun.objects.using(using).order_by("pk")
    pending = pending_for(run_id, using=using)
    events = list(
        WorkflowEvent.objects.using(using).filter(run_id=run_id).order_by("-seq")[:LAST_EVENTS]
    )
    return {
        **description,
        "lease_left": None if expires is None else (expires - now).total_seconds(),
        "origin_id": run["origin_id"],
        "origin_step": run["origin_step"],
        "copies": list(runs_of.filter(origin_id=run_id).values_list("pk", flat=True)[:LINKS_LIMIT]),
        "children": list(
            runs_of.filter(parent_id=run_id).values_list("pk", flat=True)[:LINKS_LIMIT]
        ),
        "pending_signal_names": [signal.name for signal in pending["pending_signals"]],
        "pending_update_names": [update.name for update in pending["pending_updates"]],
        "last_events": [_event_row(event) for event in reversed(events)],
    }


def _event_row(event: WorkflowEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "kind": event.kind,
        "name": event.name,
        "summary": event_summary(event),
        "at": event.created_at,
        "engine": event.engine_id,
        "epoch": event.epoch,
    }


HISTORY_COLUMNS = ["seq", "kind", "name", "summary", "at", "engine", "epoch"]


def history(run_id: str, *, after: int = -1, limit: int = 100, using: str | None = None) -> Page:
    """The run's recorded events after ``seq`` ``after``, in order, a page of ``limit``."""
    using = db_for(using)
    limit = check_limit(limit)
    if not WorkflowRun.objects.using(using).filter(pk=run_id).exists():
        raise WorkflowNotFoundError(run_id)
    events = list(
        WorkflowEvent.objects.using(using)
        .filter(run_id=run_id, seq__gt=after)
        .order_by("seq")[: limit + 1]
    )
    rows = [_event_row(event) for event in events[:limit]]
    more = len(events) > limit
    return Page(rows, str(rows[-1]["seq"]) if more else None)


ENGINE_COLUMNS = ["id", "kind", "host", "pid", "status", "claims_held", "lease_left", "heartbeat"]


def engines(*, include_stopped: bool = False, using: str | None = None) -> list[dict[str, Any]]:
    """Engines (not stopped, unless ``include_stopped``) with the claims they
    hold (counted up to the admin's cap) and their lease left (negative: expired)."""
    using = db_for(using)
    now = db_now(using)
    rows = Engine.objects.using(using)
    if not include_stopped:
        rows = rows.exclude(status=EngineStatus.STOPPED)
    found = rows.annotate(held=claims_held(connections[using])).order_by("-lease_expires_at", "id")
    return [
        {
            "id": engine.id,
            "kind": engine.kind,
            "host": engine.hostname,
            "pid": engine.pid,
            "status": engine.status,
            "claims_held": engine.held,
            "lease_left": (engine.lease_expires_at - now).total_seconds(),
            "heartbeat": engine.heartbeat_at,
        }
        for engine in found[:MAX_LIMIT]
    ]


STUCK_COLUMNS = ["run", "workflow", "status", "since", "reasons", "holder", "owner_seen"]


def stuck(*, limit: int = 100, using: str | None = None) -> dict[str, Any]:
    """The admin overview's stuck runs: due (queued, a timer, a wake hint, a
    signal or an update) for longer than ``CLAIM_TTL`` with no live owner (no
    holder, or one whose lease expired); and the claims whose holder's lease
    expired (judged as the overview's count is: ``claim_timing.cutoff``), due
    or not, oldest expiry first."""
    using = db_for(using)
    limit = check_limit(limit)
    settings = get_settings()
    now = db_now(using)
    strategy = ownership_for(CONSOLE_ENGINE_ID, settings, using=using, clock=lambda: now)
    found = stuck_runs(
        now, settings.claim_ttl, limit=limit, using=using, live_owners=strategy.live_owners
    )
    rows = [
        {
            "run": run.run_id,
            "workflow": run.workflow_name,
            "status": run.status,
            "since": run.since,
            "reasons": ", ".join(run.reasons),
            "holder": run.holder_id,
            "owner_seen": run.owner_seen,
        }
        for run in found.runs
    ]
    cutoff = settings.claim_timing.cutoff(now)
    expired = (
        Claim.objects.using(using)
        .filter(holder__isnull=False, holder__lease_expires_at__lt=cutoff)
        .order_by("holder__lease_expires_at", "workflow_id")
        .values_list("workflow_id", "holder_id", "holder__lease_expires_at", "epoch")[:limit]
    )
    claims = [
        {"run": run_id, "holder": holder, "lease_expired_at": expired_at, "epoch": epoch}
        for run_id, holder, expired_at, epoch in expired
    ]
    return {
        "rows": rows,
        "capped": found.capped,
        "expired_claims": claims,
        "claim_ttl": settings.claim_ttl,
    }


EXPIRED_CLAIM_COLUMNS = ["run", "holder", "lease_expired_at", "epoch"]
