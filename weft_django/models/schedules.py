"""Cron schedules (docs/schedules.md): one :class:`Schedule` row per declared
schedule, and the single-row :class:`ScheduleLease` whose holder fires them.

A schedule's row is its firing state: the next tick to handle, the last tick
fired and the run it started, a queued tick (overlap policy ``queue``), and
whether an operator paused it. The declaration (cron, time zone, arguments,
policies) lives in code or settings; the row keeps a copy of what is shown.
Rows are written by the lease holder's firing pass (under the lease's fence)
and by the audited operations of :mod:`weft_django.schedules.operations`.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from .engines import TokenLease


class Schedule(models.Model):
    """The firing state of one declared schedule (synced from code and settings)."""

    name = models.CharField(max_length=200, unique=True)
    workflow_name = models.CharField(max_length=255)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    catch_up = models.CharField(max_length=16, default="latest")
    overlap = models.CharField(max_length=16, default="allow")
    paused = models.BooleanField(default=False)
    #: The earliest tick not yet handled (fired or skipped); None until synced.
    next_tick = models.DateTimeField(null=True, blank=True)
    last_tick = models.DateTimeField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    last_run_id = models.CharField(max_length=255, blank=True, default="")
    #: A tick held back by overlap ``queue`` until the previous run is terminal.
    queued_tick = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("schedule")
        verbose_name_plural = _("schedules")
        constraints = [
            models.CheckConstraint(
                condition=Q(catch_up__in=["skip", "latest", "all"]),
                name="weft_schedule_catch_up_known",
            ),
            models.CheckConstraint(
                condition=Q(overlap__in=["allow", "skip", "queue"]),
                name="weft_schedule_overlap_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.cron} {self.timezone})"


class ScheduleLease(TokenLease):
    """The single-row lease of the schedule-firing pass: at most one firer at a
    time across the store; every firing renews the lease at its token in the
    firing's own transaction."""

    class Meta:
        verbose_name = _("schedule lease")
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="weft_schedule_lease_singleton"),
            models.CheckConstraint(
                condition=Q(token__gte=0), name="weft_schedule_lease_token_nonnegative"
            ),
        ]
