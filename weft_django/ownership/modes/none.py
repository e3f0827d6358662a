"""Mode ``none``: one worker, no fencing.

Runs are still claimed (so a graceful restart finds them ownerless and the
admin shows who ran them), but writes are not fenced: a second live engine
could run the same workflow twice. Its engines skip the boot gates and never
touch the ownership-mode marker; a second live engine is warned about at boot
and by the system check ``weft.W001``. A Celery task's store-wide passes never
drive in this mode: they leave wake hints for the one worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction

from ...conf import NO_OWNERSHIP
from .workflow_lease import WorkflowLeaseOwnership


class NoOwnership(WorkflowLeaseOwnership):
    name = NO_OWNERSHIP
    uses_marker = False
    max_live_engines = 1
    # Nothing is fenced: a Celery task that drove runs would be the second
    # engine this mode cannot make safe. Its passes only leave wake hints.
    short_lived_drives = False

    @contextmanager
    def fenced(self, run_id: str, epoch: int) -> Iterator[None]:
        with transaction.atomic(using=self.using):
            yield

    def insert_fenced(
        self,
        run_id: str,
        epoch: int,
        rows: list[tuple[Any, ...]],
        mark_running: tuple[str, datetime | None] | None,
    ) -> bool | None:
        return None

    def finish_fenced(self, run_id: str, epoch: int, **values: Any) -> bool | None:
        return None
