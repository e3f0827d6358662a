"""Runs and their history: the run row, its recorded events, its signals and
update requests, and the statuses they move through."""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..stored_json import StoredJSONField


class RunStatus(models.TextChoices):
    PENDING = "pending", _("pending")
    RUNNING = "running", _("running")
    WAITING = "waiting", _("waiting")
    SUSPENDED = "suspended", _("suspended")
    COMPLETED = "completed", _("completed")
    FAILED = "failed", _("failed")
    CANCELLED = "cancelled", _("cancelled")
    TIMED_OUT = "timed_out", _("timed out")


TERMINAL_STATUSES = (
    RunStatus.COMPLETED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.TIMED_OUT,
)
ACTIVE_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING)


class WorkflowRun(models.Model):
    id = models.CharField(primary_key=True, max_length=255)
    workflow_name = models.CharField(max_length=255)  # weft_run_name_created_idx
    workflow_version = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING)
    args = StoredJSONField(default=list, encoder=DjangoJSONEncoder)
    kwargs = StoredJSONField(default=dict, encoder=DjangoJSONEncoder)
    result = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    error = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    parent_id = models.CharField(max_length=255, blank=True, default="")
    # The run this one was made from by ``weft.retry`` (``origin_step`` None) or
    # ``weft.fork`` (``origin_step`` the step it ran again from); None otherwise
    # (NULL, not "": adding the column rewrites no row).
    origin_id = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    origin_step = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    start_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    timeout_at = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(null=True, blank=True)
    waiting_on = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    wake_hint_at = models.DateTimeField(null=True, blank=True)
    # Flow control (docs/flow-control.md): the queue whose limits the run's turns
    # obey, its priority (-100..100, higher first) and its concurrency key.
    # Database defaults too: a row inserted by raw SQL (a bulk load) gets them.
    queue = models.CharField(max_length=64, default="default", db_default="default")
    priority = models.SmallIntegerField(default=0, db_default=0)
    concurrency_key = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("workflow run")
        permissions = [
            (
                "operate_workflowrun",
                "Can operate workflow runs (cancel, suspend, resume, send signals)",
            ),
        ]
        indexes = [
            models.Index(fields=["-created_at"], name="weft_run_created_idx"),
            models.Index(fields=["parent_id"], name="weft_run_parent_idx"),
            # The run page's "retries and forks of this run".
            models.Index(fields=["origin_id"], name="weft_run_origin_idx"),
            # The admin: runs filtered by status or workflow in the changelist's
            # order (newest first, then id: no sort), and "failed in the last day".
            models.Index(fields=["status", "created_at", "id"], name="weft_run_status_created_idx"),
            models.Index(
                fields=["workflow_name", "created_at", "id"], name="weft_run_name_created_idx"
            ),
            models.Index(
                fields=["finished_at"], name="weft_run_failed_idx", condition=Q(status="failed")
            ),
            models.Index(
                fields=["status", "start_at", "created_at"],
                name="weft_run_active_idx",
                condition=Q(status__in=["pending", "running", "waiting"]),
            ),
            # The ready queue of the intake (weft_django.ownership.claims.intake): pending
            # runs in pickup order. Created only where partial indexes exist
            # (migration 0007): on MariaDB/MySQL weft_run_active_idx, a full index
            # there, is already this order (InnoDB appends the primary key).
            models.Index(
                fields=["start_at", "created_at", "id"],
                name="weft_run_ready_idx",
                condition=Q(status="pending"),
            ),
            # The intake's fast lane (weft_django.ownership.claims.intake): pending
            # runs of a positive priority, highest first. A full index on
            # MariaDB/MySQL (migration 0019), which has no partial ones.
            models.Index(
                fields=["status", "-priority", "created_at", "id"],
                name="weft_run_priority_idx",
                condition=Q(status="pending", priority__gt=0),
            ),
            # The reclaim scan walks started runs in id order, one status at a time.
            models.Index(
                fields=["status", "id"],
                name="weft_run_started_id_idx",
                condition=Q(status__in=["running", "waiting"]),
            ),
            # The fast tick's due runs, walked in (time, id) order (full indexes
            # on MariaDB/MySQL, which has no partial ones).
            models.Index(
                fields=["wake_at", "id"],
                name="weft_run_wake_at_idx",
                condition=Q(wake_at__isnull=False),
            ),
            models.Index(
                fields=["wake_hint_at", "id"],
                name="weft_run_wake_hint_idx",
                condition=Q(wake_hint_at__isnull=False),
            ),
            # Retention's keyset walk over finished runs, oldest first, per status.
            models.Index(fields=["status", "finished_at", "id"], name="weft_run_finished_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_name}:{self.id}"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class WorkflowEvent(models.Model):
    """One recorded durable operation of a run, at its sequence number."""

    # No index of its own: the unique constraint below leads with the run.
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=255, blank=True, default="")
    result = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    error = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    engine_id = models.CharField(max_length=64, blank=True, default="")
    epoch = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run_id", "seq"]
        verbose_name = _("workflow event")
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="weft_event_run_seq_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.kind}:{self.name}"


class WorkflowSignal(models.Model):
    """A durably buffered signal, consumed exactly once by ``wait_for_signal``."""

    # No index of its own: the unique constraint below leads with the run.
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="signals", db_index=False
    )
    signal_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    payload = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(default=timezone.now)
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_seq = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "id"]
        verbose_name = _("workflow signal")
        constraints = [
            models.UniqueConstraint(
                fields=["run", "signal_id"], name="weft_signal_run_signal_id_uniq"
            ),
        ]
        indexes = [
            models.Index(
                fields=["run", "name", "id"],
                name="weft_signal_unconsumed_idx",
                condition=Q(consumed_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.name}({self.signal_id})"


class UpdateStatus(models.TextChoices):
    PENDING = "pending", _("pending")
    DELIVERED = "delivered", _("delivered to wait_for_update")
    APPLIED = "applied", _("applied")
    REJECTED = "rejected", _("rejected")
    FAILED = "failed", _("failed")


class UpdateRequest(models.Model):
    """A request/response message into a running workflow."""

    # No index of its own: the unique constraint below leads with the run.
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="updates", db_index=False
    )
    update_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    payload = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    status = models.CharField(
        max_length=16, choices=UpdateStatus.choices, default=UpdateStatus.PENDING
    )
    response = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    error = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    applied_seq = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    responded_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["run_id", "id"]
        verbose_name = _("update request")
        constraints = [
            models.UniqueConstraint(
                fields=["run", "update_id"], name="weft_update_run_update_id_uniq"
            ),
        ]
        indexes = [
            models.Index(
                fields=["run", "id"],
                name="weft_update_pending_idx",
                condition=Q(status="pending"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.name}({self.update_id})"
