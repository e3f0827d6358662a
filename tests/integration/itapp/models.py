"""``StepExecution``: one row per execution of an integration workflow's step.

Rows of kind ``step`` are written by ``transactional=True`` steps, inside the
fenced checkpoint transaction, so each (run, step) must appear exactly once
however workers crash, stop or are taken over. Rows of kind ``nap`` are
written outside any transaction when a slow step *starts*, so the tests can
see which process is executing a run (and every attempt is kept).
"""

from __future__ import annotations

from django.db import models


class StepExecution(models.Model):
    run_id = models.CharField(max_length=255, db_index=True)
    step = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, default="step")
    pid = models.PositiveIntegerField()
    epoch = models.BigIntegerField(default=0)
    at = models.FloatField(help_text="time.time() when the step ran (wall clock)")

    class Meta:
        app_label = "itapp"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.step} ({self.kind}, pid {self.pid})"


class FlowSpan(models.Model):
    """One execution of a flow-control test step: when it started and ended
    (wall clock; None: its worker died in the step), its run's concurrency key,
    and the worker process (tests/integration/itapp/workflows.py: ``flow_span``,
    ``fenced_span``)."""

    run_id = models.CharField(max_length=255)
    key = models.CharField(max_length=64)
    pid = models.PositiveIntegerField()
    started = models.FloatField()
    ended = models.FloatField(null=True)

    class Meta:
        app_label = "itapp"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.run_id} [{self.key}] {self.started:.3f}-{self.ended:.3f}"
