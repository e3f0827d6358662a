"""The Django admin of weft_django: who holds what, and the runs it drives.

Django's admin autodiscovery imports this package; the registrations live in
:mod:`.options` (ModelAdmins), with :mod:`.filters`, :mod:`.actions` and
:mod:`.display` apart, as in ``django.contrib.admin`` itself.
"""

from .display import LEASE_STYLE, precise, render_lease_state
from .filters import LeaseStateFilter
from .options import (
    ClaimAdmin,
    EngineAdmin,
    GlobalLeaseAdmin,
    OwnershipMarkerAdmin,
    UpdateRequestAdmin,
    WorkflowEventAdmin,
    WorkflowRunAdmin,
    WorkflowSignalAdmin,
)

__all__ = [
    "LEASE_STYLE",
    "ClaimAdmin",
    "EngineAdmin",
    "GlobalLeaseAdmin",
    "LeaseStateFilter",
    "OwnershipMarkerAdmin",
    "UpdateRequestAdmin",
    "WorkflowEventAdmin",
    "WorkflowRunAdmin",
    "WorkflowSignalAdmin",
    "precise",
    "render_lease_state",
]
