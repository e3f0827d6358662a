"""Who may do what to runs in the admin (docs/admin.md, "Permissions").

* ``operate_workflowrun``: suspend, resume, send a signal;
* ``operate_workflowrun`` and ``delete_workflowrun``: cancel (irreversible);
* ``delete_workflowrun``: purge (irreversible, deletes the history).
"""

from __future__ import annotations

from django.http import HttpRequest

from ..models import WorkflowRun


def _has(request: HttpRequest, action: str) -> bool:
    opts = WorkflowRun._meta
    return request.user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}")


def operate_permission(request: HttpRequest) -> bool:
    """Suspend, resume, send a signal."""
    return _has(request, "operate")


def purge_permission(request: HttpRequest) -> bool:
    """Purge: irreversible, so the delete permission."""
    return _has(request, "delete")


def cancel_permission(request: HttpRequest) -> bool:
    """Cancel: an operation, and irreversible, so both."""
    return operate_permission(request) and purge_permission(request)


#: The permission check of each operation.
PERMISSION_OF = {
    "cancel": cancel_permission,
    "suspend": operate_permission,
    "resume": operate_permission,
    "signal": operate_permission,
    "purge": purge_permission,
}
