"""The Django admin of weft_django: an operator's console over who holds what.

Django's admin autodiscovery imports this package; it only re-exports and
registers. As in ``django.contrib.admin`` itself the parts live apart:
:mod:`.options` (engine-state ModelAdmins), :mod:`.runs` (runs and their
history), :mod:`.views` (the overview and the engine page), :mod:`.run_page`
(the run page and its operations), :mod:`.overview` and :mod:`.timeline`
(what those pages show), :mod:`.actions` (batched, permission-gated actions
and the cancel / purge confirmation pages), :mod:`.permissions` (which
permission each operation needs), :mod:`.forms` (send-signal, the reason
field), :mod:`.filters`, :mod:`.scale` (capped counts, exact search),
:mod:`.display`, :mod:`.stuck` (the overview's stuck runs), :mod:`.passes`
(the Celery pass summaries) and :mod:`.schedules` (cron schedules: pause, resume,
trigger now). Every operation goes through :mod:`weft_django.operations`,
which records it (a ``LogEntry`` for the operator, a log line)."""

from .display import LEASE_STYLE, precise, render_lease_state
from .filters import LeaseStateFilter
from .options import (
    ClaimAdmin,
    EngineAdmin,
    GlobalLeaseAdmin,
    OwnershipMarkerAdmin,
)
from .passes import PassSummaryAdmin
from .runs import (
    UpdateRequestAdmin,
    WorkflowEventAdmin,
    WorkflowRunAdmin,
    WorkflowSignalAdmin,
)
from .schedules import ScheduleAdmin
from .views import OverviewAdmin

__all__ = [
    "LEASE_STYLE",
    "ClaimAdmin",
    "EngineAdmin",
    "GlobalLeaseAdmin",
    "LeaseStateFilter",
    "OverviewAdmin",
    "OwnershipMarkerAdmin",
    "PassSummaryAdmin",
    "ScheduleAdmin",
    "UpdateRequestAdmin",
    "WorkflowEventAdmin",
    "WorkflowRunAdmin",
    "WorkflowSignalAdmin",
    "precise",
    "render_lease_state",
]
