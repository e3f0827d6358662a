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
from functools import cached_property

from django.db import connections, transaction

from ...conf import NO_OWNERSHIP
from ..writes.requests import Checkpoint, Fence, Finish, Form, NoOneStatementForm, forms_on
from .workflow_lease import WorkflowLeaseOwnership

#: The one-statement forms of this mode (those the database has).
NO_OWNERSHIP_FORMS = frozenset({Form.PARK, Form.TAKE_SIGNAL})


class NoOwnership(WorkflowLeaseOwnership):
    name = NO_OWNERSHIP
    uses_marker = False
    max_live_engines = 1
    # Nothing is fenced: a Celery task that drove runs would be the second
    # engine this mode cannot make safe. Its passes only leave wake hints.
    short_lived_drives = False

    @contextmanager
    def fenced(self, fence: Fence) -> Iterator[None]:
        with transaction.atomic(using=self.using):
            yield

    @cached_property
    def one_statement(self) -> frozenset[Form]:
        """The park and the signal take only, where the database has them: those
        statements still check the claim (which this mode's engine holds); the
        checkpoint and the terminal commit are written unfenced in :meth:`fenced`."""
        return forms_on(connections[self.using].vendor) & NO_OWNERSHIP_FORMS

    def insert_fenced(self, fence: Fence, checkpoint: Checkpoint) -> bool:
        raise NoOneStatementForm(checkpoint.form, f"mode {self.name!r}")

    def finish_fenced(self, fence: Fence, finish: Finish) -> bool:
        raise NoOneStatementForm(finish.form, f"mode {self.name!r}")
