"""Database models: runs and their history, signals, updates, and ownership state.

- :mod:`.runs`: ``WorkflowRun``, its ``WorkflowEvent`` history, its
  ``WorkflowSignal`` and ``UpdateRequest`` rows, and their statuses;
- :mod:`.engines`: ``Engine``, ``Claim``, ``OwnershipMarker``,
  ``GlobalLease`` and ``PrunerLease``: ownership state, written only through
  :mod:`weft_django.ownership` with conditional UPDATEs checked by rowcount;
- :mod:`.schedules`: ``Schedule`` (each cron schedule's firing state) and
  ``ScheduleLease`` (the single-row lease of the firing pass);
- :mod:`.flow`: ``QueueSlot`` and ``QueueRate``: flow control's concurrency
  slots and rate cells (docs/flow-control.md);
- :mod:`.passes`: ``PassSummary`` (the Celery passes) and ``Overview`` (the
  admin's overview entry);
- :mod:`.databases`: ``db_for`` (which database weft's tables live on) and the
  MariaDB/MySQL collation.

Nothing here hides side effects in ``save()``.
"""

from .databases import db_for, is_mariadb, mysql_collation
from .engines import (
    Claim,
    Engine,
    EngineKind,
    EngineStatus,
    GlobalLease,
    OwnershipMarker,
    PrunerLease,
)
from .flow import QueueRate, QueueSlot
from .passes import Overview, PassKind, PassSummary
from .runs import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from .schedules import Schedule, ScheduleLease

__all__ = [  # noqa: RUF022 (grouped as the modules are)
    "ACTIVE_STATUSES",
    "TERMINAL_STATUSES",
    "RunStatus",
    "UpdateRequest",
    "UpdateStatus",
    "WorkflowEvent",
    "WorkflowRun",
    "WorkflowSignal",
    "Claim",
    "Engine",
    "EngineKind",
    "EngineStatus",
    "GlobalLease",
    "OwnershipMarker",
    "PrunerLease",
    "QueueRate",
    "QueueSlot",
    "Overview",
    "PassKind",
    "PassSummary",
    "Schedule",
    "ScheduleLease",
    "db_for",
    "is_mariadb",
    "mysql_collation",
]
