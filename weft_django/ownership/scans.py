"""The queries behind every scan: new work, due wakes, reclaim candidates.

Each returns workflow ids only, in a stable order, bounded by ``limit``;
the caller claims and drives them one by one.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Exists, OuterRef, Q

from ..models import ACTIVE_STATUSES, Claim, RunStatus, WorkflowRun


def _held_by(engine_id: str) -> Exists:
    return Exists(Claim.objects.filter(workflow_id=OuterRef("pk"), holder_id=engine_id))


def has_holder() -> Exists:
    return Exists(Claim.objects.filter(workflow_id=OuterRef("pk"), holder__isnull=False))


def pending_due(now: datetime, *, limit: int = 100, using: str = "default") -> list[str]:
    """Pending runs whose start time has come and that nobody holds."""
    return list(
        WorkflowRun.objects.using(using)
        .filter(status=RunStatus.PENDING)
        .filter(Q(start_at__isnull=True) | Q(start_at__lte=now))
        .filter(~has_holder())
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )


def held_due(
    engine_id: str, now: datetime, *, limit: int = 500, using: str = "default"
) -> list[str]:
    """Runs this engine holds with a wake hint, a due timer/deadline, or still pending."""
    return list(
        WorkflowRun.objects.using(using)
        .filter(status__in=ACTIVE_STATUSES)
        .filter(
            Q(wake_hint_at__isnull=False)
            | Q(wake_at__lte=now)
            | Q(status=RunStatus.PENDING, start_at__isnull=True)
            | Q(status=RunStatus.PENDING, start_at__lte=now)
        )
        .filter(_held_by(engine_id))
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


def ownerless_active(*, limit: int = 500, using: str = "default") -> list[str]:
    """Running or waiting runs with no holder at all (e.g. after a graceful shutdown)."""
    return list(
        WorkflowRun.objects.using(using)
        .filter(status__in=(RunStatus.RUNNING, RunStatus.WAITING))
        .filter(~has_holder())
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


def expired_holders(cutoff: datetime, *, limit: int = 500, using: str = "default") -> list[str]:
    """Active runs whose holder's lease ended before ``cutoff`` (now - 2 x renew)."""
    return list(
        Claim.objects.using(using)
        .filter(holder__isnull=False, holder__lease_expires_at__lt=cutoff)
        .filter(
            Exists(
                WorkflowRun.objects.filter(pk=OuterRef("workflow_id"), status__in=ACTIVE_STATUSES)
            )
        )
        .order_by("workflow_id")
        .values_list("workflow_id", flat=True)[:limit]
    )
