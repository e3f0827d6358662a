"""Database models: runs and their history, signals, updates, and ownership state.

Engine state (engines, claims, the ownership-mode marker, the global lease) is
written only through :mod:`weft_django.ownership` with conditional UPDATEs
checked by rowcount; nothing here hides side effects in ``save()``.
"""

from __future__ import annotations

from typing import Any, cast

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .stored_json import StoredJSONField


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


class EngineKind(models.TextChoices):
    """What hosts an engine; each label is its value, the one word used everywhere
    (admin, ``weft_marker``, docs): ``worker`` is a ``manage.py weft_worker``
    process, ``celery`` a Celery beat task's pass, ``test`` the test driver."""

    WORKER = "worker", _("worker")
    CELERY = "celery", _("celery")
    TEST = "test", _("test")
    OTHER = "other", _("other")


class EngineStatus(models.TextChoices):
    RUNNING = "running", _("running")
    DISPOSING = "disposing", _("disposing")
    STOPPED = "stopped", _("stopped")


class Engine(models.Model):
    """One engine process. Its lease is what keeps every claim it holds alive."""

    id = models.CharField(primary_key=True, max_length=64)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=EngineKind.choices)
    ownership_mode = models.CharField(max_length=32)
    status = models.CharField(
        max_length=16, choices=EngineStatus.choices, default=EngineStatus.RUNNING
    )
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    revocations = models.BigIntegerField(
        default=0,
        help_text="Bumped in the same transaction whenever another process takes or "
        "revokes one of this engine's claims; renewal compares it to find lost claims.",
    )
    passes = StoredJSONField(
        default=dict,
        blank=True,
        encoder=DjangoJSONEncoder,
        help_text="The last summary of each pass this engine ran (pass name -> summary).",
    )

    class Meta:
        ordering = ["-started_at"]
        verbose_name = _("engine")
        indexes = [
            # Retention's walk over stopped engines, oldest first.
            models.Index(fields=["status", "stopped_at", "id"], name="weft_engine_stopped_idx"),
            # The overview's live and dead engines and retention's walk over dead
            # ones (lease expired, never stopped), per status, by lease end.
            models.Index(fields=["status", "lease_expires_at"], name="weft_engine_lease_idx"),
            # The overview's recently stopped engines without the Celery passes'.
            models.Index(
                fields=["status", "kind", "stopped_at"], name="weft_engine_kind_stopped_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.hostname}:{self.pid})"


class Claim(models.Model):
    """Per-workflow ownership: a fencing epoch that is never reset, and a holder.

    Keyed by workflow id rather than a foreign key to the run, so the epoch
    survives purging the run and reusing its id.
    """

    workflow_id = models.CharField(primary_key=True, max_length=255)
    epoch = models.BigIntegerField(default=0)
    holder = models.ForeignKey(
        Engine,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="claims",
        db_index=False,  # weft_claim_holder_wid_idx leads with the holder
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    #: When a holder let go of a run it had not finished (graceful shutdown, a
    #: release at park); None once the run ends. The reclaim sweep reads these.
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workflow_id"]
        verbose_name = _("workflow claim")
        indexes = [
            # The batched takeover walks one holder's claims in id order.
            models.Index(fields=["holder", "workflow_id"], name="weft_claim_holder_wid_idx"),
            # The ownerless sweep: claims let go of before their run ended.
            models.Index(
                fields=["workflow_id"],
                name="weft_claim_released_idx",
                condition=Q(holder__isnull=True, released_at__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(epoch__gte=0), name="weft_claim_epoch_nonnegative"),
            models.CheckConstraint(
                condition=(
                    Q(holder__isnull=True, claimed_at__isnull=True)
                    | Q(holder__isnull=False, claimed_at__isnull=False, epoch__gte=1)
                ),
                name="weft_claim_holder_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id}@{self.epoch}"


class OwnershipMarker(models.Model):
    """The store-wide ownership mode, established by the first engine to boot."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    mode = models.CharField(max_length=64)
    established_at = models.DateTimeField()
    established_by = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        verbose_name = _("ownership-mode marker")
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="weft_marker_singleton"),
        ]

    def __str__(self) -> str:
        return f"{self.mode} since {self.established_at:%Y-%m-%d %H:%M:%S}"


class GlobalLease(models.Model):
    """The single-writer lease of ownership mode ``lease`` (a singleton row)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    epoch = models.BigIntegerField(default=0)
    holder = models.ForeignKey(
        Engine, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    acquired_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("global lease")
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="weft_global_lease_singleton"),
            models.CheckConstraint(
                condition=Q(epoch__gte=0), name="weft_global_lease_epoch_nonnegative"
            ),
        ]

    def __str__(self) -> str:
        return f"global lease @{self.epoch}"


class PrunerLease(models.Model):
    """The single-row lease of the optional worker prune pass: at most one pruner
    at a time across the store. ``token`` is bumped on every acquisition and
    fences renewals and the release (conditional UPDATEs checked by rowcount)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    token = models.BigIntegerField(default=0)
    holder = models.CharField(max_length=64, blank=True, default="")
    acquired_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("pruner lease")
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="weft_pruner_lease_singleton"),
            models.CheckConstraint(
                condition=Q(token__gte=0), name="weft_pruner_lease_token_nonnegative"
            ),
        ]

    def __str__(self) -> str:
        return f"pruner lease @{self.token} {self.holder or '(free)'}"


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
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    start_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    timeout_at = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(null=True, blank=True)
    waiting_on = StoredJSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    wake_hint_at = models.DateTimeField(null=True, blank=True)

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


class PassKind(models.TextChoices):
    """The Celery beat passes (weft_django.beat), one :class:`PassSummary` row each."""

    SIGNAL_POLL = "signal_poll", _("signal poll")
    UPDATE_POLL = "update_poll", _("update poll")
    PRUNE = "prune", _("prune")


class PassSummary(models.Model):
    """The last run of one Celery pass: one row per pass kind, upserted at the end
    of every pass (so the table never grows), shown on the overview."""

    kind = models.CharField(primary_key=True, max_length=32, choices=PassKind.choices)
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)
    engine_id = models.CharField(max_length=64, blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    succeeded = models.BooleanField(default=True)
    #: The last pass's counts per outcome (or rows deleted per table, for prune).
    counts = StoredJSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    #: The last pass's error ("" when it ran through); ``failures`` its per-run ones.
    error = models.TextField(blank=True, default="")
    failures = StoredJSONField(default=list, blank=True, encoder=DjangoJSONEncoder)
    #: The most recent error of any pass of this kind, kept after later successes.
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    passes = models.BigIntegerField(default=0, help_text="Passes of this kind recorded.")

    class Meta:
        ordering = ["kind"]
        verbose_name = _("Celery pass summary")
        verbose_name_plural = _("Celery pass summaries")

    def __str__(self) -> str:
        return f"{self.kind} at {self.finished_at:%Y-%m-%d %H:%M:%S}"


class Overview(models.Model):
    """No table: the admin's operator overview page hangs off this name
    (``/admin/weft_django/overview/``); it is never queried."""

    class Meta:
        managed = False
        verbose_name = _("overview")
        verbose_name_plural = _("overview")
        default_permissions = ()

    def __str__(self) -> str:
        return "overview"


def db_for(using: str | None = None) -> str:
    """The database alias weft works on: ``using`` when given, else the router's
    choice for writing runs (``"default"`` when no router says otherwise).

    Every weft table must live on that one database: a claim and the run it
    fences are written in one transaction.
    """
    return using if using is not None else router.db_for_write(WorkflowRun)


def mysql_collation(connection: BaseDatabaseWrapper) -> str:
    """The collation of weft's text columns on MySQL/MariaDB: binary and without
    padding, so ids and names compare exactly as on PostgreSQL and SQLite (the
    server defaults ignore case, accents and trailing spaces: "Order-1",
    "order-1" and "order-1 " would be one workflow id there)."""
    return "utf8mb4_nopad_bin" if is_mariadb(connection) else "utf8mb4_0900_bin"


def is_mariadb(connection: BaseDatabaseWrapper) -> bool:
    """MySQL's DatabaseWrapper knows its server (the stubs type only the base class)."""
    return bool(cast(Any, connection).mysql_is_mariadb)
