"""What the operator's pages read besides runs and engines: the last run of each
Celery pass, and the overview's admin entry."""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils.translation import gettext_lazy as _

from ..stored_json import StoredJSONField


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
