"""Who may see and do what in the admin (docs/admin.md, "Permissions").

Seeing:

* each page needs its model's own ``view_`` permission (``change_`` does not
  imply it: the admin edits no row); the overview and the run page need
  ``view_workflowrun``;
* payloads (the runs' arguments, results and errors, the steps' results,
  signal and update payloads) need :func:`payload_permission`
  (``view_workflowevent``: the history table, where every step's result is);
* engines (ids, which name the host and pid, hosts, pids, passes) need
  :func:`engine_permission` (``view_engine``).

Doing (each also needs ``view_workflowrun``):

* ``operate_workflowrun``: suspend, resume, send a signal;
* ``operate_workflowrun`` and ``delete_workflowrun``: cancel (irreversible);
* ``delete_workflowrun``: purge (irreversible, deletes the history);
* ``operate_workflowrun`` and ``add_workflowrun``: retry and fork (each starts
  a run); cancel with children needs what cancel needs.
"""

from __future__ import annotations

from django.db import models
from django.http import HttpRequest

from ..models import Engine, WorkflowEvent, WorkflowRun


def has_model_perm(request: HttpRequest, action: str, model: type[models.Model]) -> bool:
    opts = model._meta
    return request.user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}")


def _has(request: HttpRequest, action: str) -> bool:
    return has_model_perm(request, action, WorkflowRun)


def view_permission(request: HttpRequest, model: type[models.Model]) -> bool:
    """The model's own ``view_`` permission, and only it."""
    return has_model_perm(request, "view", model)


def payload_permission(request: HttpRequest) -> bool:
    """Payloads: ``view_workflowevent``, which already shows every step's result."""
    return view_permission(request, WorkflowEvent)


def engine_permission(request: HttpRequest) -> bool:
    """Engines' ids, hosts, pids and passes: ``view_engine``."""
    return view_permission(request, Engine)


def operate_permission(request: HttpRequest) -> bool:
    """Suspend, resume, send a signal."""
    return _has(request, "operate")


def purge_permission(request: HttpRequest) -> bool:
    """Purge: irreversible, so the delete permission."""
    return _has(request, "delete")


def cancel_permission(request: HttpRequest) -> bool:
    """Cancel: an operation, and irreversible, so both."""
    return operate_permission(request) and purge_permission(request)


def recover_permission(request: HttpRequest) -> bool:
    """Retry and fork (each starts a run): ``operate_workflowrun`` and ``add_workflowrun``."""
    return operate_permission(request) and _has(request, "add")


#: The permission check of each operation.
PERMISSION_OF = {
    "cancel": cancel_permission,
    "suspend": operate_permission,
    "resume": operate_permission,
    "signal": operate_permission,
    "purge": purge_permission,
}
