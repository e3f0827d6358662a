"""Ownership state: engine rows (the lease claims live on), per-workflow claims,
the store-wide ownership-mode marker and the single-row leases.

Written only through :mod:`weft_django.ownership`, with conditional UPDATEs
checked by rowcount; nothing here hides side effects in ``save()``.
"""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from ..stored_json import StoredJSONField


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
    workflows = StoredJSONField(
        default=dict,
        blank=True,
        encoder=DjangoJSONEncoder,
        help_text="The workflows this engine serves: name -> the versions registered in "
        "its process (it claims only runs of these).",
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


class TokenLease(models.Model):
    """A single-row lease fenced by a token (abstract): ``token`` is bumped on
    every acquisition and fences renewals and the release (conditional UPDATEs
    checked by rowcount); each subclass names its own singleton constraints."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    token = models.BigIntegerField(default=0)
    holder = models.CharField(max_length=64, blank=True, default="")
    acquired_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self._meta.verbose_name} @{self.token} {self.holder or '(free)'}"


class PrunerLease(TokenLease):
    """The single-row lease of the optional worker prune pass: at most one pruner
    at a time across the store."""

    class Meta:
        verbose_name = _("pruner lease")
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="weft_pruner_lease_singleton"),
            models.CheckConstraint(
                condition=Q(token__gte=0), name="weft_pruner_lease_token_nonnegative"
            ),
        ]
