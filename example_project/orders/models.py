"""Models of the example app.

``StepLog`` is a side-effect table: workflow steps append a row per execution,
so tests and the worker integration suite can count how many times a step's
database write really committed (exactly once for ``transactional=True``).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class StepLog(models.Model):
    run_id = models.CharField(max_length=255, db_index=True)
    step = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.step}"
