"""The admin of runs and their history: capped counts, static filters, exact search.

The run page (:class:`~.run_page.RunPageMixin`) shows a paginated timeline instead
of inlines; changes are admin actions (:mod:`.actions`) and the run page's
buttons, all through :mod:`weft_django.operations` (audited). Permissions
(:mod:`.permissions`): ``operate_workflowrun`` for suspend / resume /
send-signal, ``operate_workflowrun`` and ``delete_workflowrun`` for cancel,
``delete_workflowrun`` for purge (the table is never deleted from directly:
Django's delete views stay off).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.db.models import OuterRef, Subquery
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from ..conf import get_settings
from ..models import (
    Claim,
    UpdateRequest,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from ..ownership import lease_state_expression
from .actions import cancel_runs, purge_runs, resume_runs, suspend_runs
from .display import admin_link, compact_json, engine_label, render_lease_state, request_cutoff
from .filters import EventKindFilter, OwnerLeaseStateFilter, WorkflowNameFilter
from .forms import RunActionForm
from .options import ReadOnlyAdminMixin
from .permissions import cancel_permission, operate_permission, purge_permission
from .run_page import RunPageMixin
from .scale import CappedCountMixin, ExactSearchMixin


@admin.register(WorkflowRun)
class WorkflowRunAdmin(
    RunPageMixin, CappedCountMixin, ExactSearchMixin, ReadOnlyAdminMixin, admin.ModelAdmin
):
    """Runs with their owner from the claim table (one query for the whole page).

    Actions call the public API, so the epoch rotation of revocation applies;
    ``permissions=["operate"]`` makes Django call :meth:`has_operate_permission`,
    ``["cancel"]`` :meth:`has_cancel_permission` and ``["purge"]``
    :meth:`has_purge_permission`. The action bar has a reason field
    (:class:`~.forms.RunActionForm`), recorded with each run's operation.
    """

    list_display = (
        "id",
        "workflow_name",
        "status",
        "owner_display",
        "claim_epoch_display",
        "owner_lease_display",
        "waiting_on_display",
        "wake_at",
        "updated_at",
    )
    list_filter = ("status", WorkflowNameFilter, OwnerLeaseStateFilter)
    search_fields = ("id",)
    exact_search_fields = ("id", "parent_id", "workflow_name")
    search_help_text = _("Exact, case-sensitive run id, parent id or workflow name.")
    readonly_fields = ("owner_display", "claim_epoch_display", "owner_lease_display")
    actions = (cancel_runs, suspend_runs, resume_runs, purge_runs)
    payload_fields = ("args", "kwargs", "result", "error")
    engine_fields = ("owner_display",)
    action_form = RunActionForm
    # Newest first (an index); sorting a million rows by another column, or by
    # the owner annotations, would be a full sort on every page.
    sortable_by = ("id",)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Who may suspend and resume runs: ``operate_workflowrun`` holders."""
        return operate_permission(request)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        """Cancel is irreversible: ``operate_workflowrun`` and ``delete_workflowrun``."""
        return cancel_permission(request)

    def has_purge_permission(self, request: HttpRequest) -> bool:
        """Purge is irreversible: it needs ``delete_workflowrun``."""
        return purge_permission(request)

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        cutoff_at = request_cutoff(request, get_settings().claim_timing)
        claim = Claim.objects.filter(workflow_id=OuterRef("pk"))
        return (
            super()
            .get_queryset(request)
            .annotate(
                claim_holder_id=Subquery(claim.values("holder_id")[:1]),
                claim_holder_hostname=Subquery(claim.values("holder__hostname")[:1]),
                claim_holder_expires_at=Subquery(claim.values("holder__lease_expires_at")[:1]),
                claim_epoch=Subquery(claim.values("epoch")[:1]),
            )
            .annotate(
                owner_lease_state=lease_state_expression(
                    "claim_holder_expires_at", cutoff_at, held_field="claim_holder_id"
                )
            )
        )

    @admin.display(description=_("owner engine"), ordering="claim_holder_id")
    def owner_display(self, obj: WorkflowRun) -> str:
        return engine_label(
            getattr(obj, "claim_holder_id", None), getattr(obj, "claim_holder_hostname", None)
        )

    @admin.display(description=_("epoch"), ordering="claim_epoch")
    def claim_epoch_display(self, obj: WorkflowRun) -> int | None:
        return getattr(obj, "claim_epoch", None)

    @admin.display(description=_("owner lease"), ordering="owner_lease_state")
    def owner_lease_display(self, obj: WorkflowRun) -> str:
        return render_lease_state(getattr(obj, "owner_lease_state", None))

    @admin.display(description=_("waiting on"))
    def waiting_on_display(self, obj: WorkflowRun) -> str:
        return compact_json(obj.waiting_on)


class RunLinkMixin(CappedCountMixin, ExactSearchMixin):
    sortable_by = ()  # newest first only: the history tables are the biggest

    # Newest first by primary key: the models' default ordering ("run", ...)
    # would join every row to its run just to sort by the run's created_at.
    ordering = ("-id",)

    @admin.display(description=_("run"), ordering="run_id")
    def run_link(self, obj: Any) -> str:
        return admin_link(WorkflowRun, obj.run_id, obj.run_id)


@admin.register(WorkflowEvent)
class WorkflowEventAdmin(RunLinkMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("run_link", "seq", "kind", "name", "engine_id", "epoch", "created_at")
    list_filter = (EventKindFilter,)
    engine_fields = ("engine_id",)
    search_fields = ("run__id",)
    exact_search_fields = ("run_id",)
    search_help_text = _("Exact, case-sensitive run id.")


@admin.register(WorkflowSignal)
class WorkflowSignalAdmin(RunLinkMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("run_link", "signal_id", "name", "created_at", "consumed_at", "consumed_seq")
    list_filter = (("consumed_at", admin.EmptyFieldListFilter),)
    payload_fields = ("payload",)
    search_fields = ("run__id",)
    exact_search_fields = ("run_id",)
    search_help_text = _("Exact, case-sensitive run id.")


@admin.register(UpdateRequest)
class UpdateRequestAdmin(RunLinkMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "run_link",
        "update_id",
        "name",
        "status",
        "created_at",
        "responded_at",
        "expires_at",
    )
    list_filter = ("status",)
    payload_fields = ("payload", "response", "error")
    search_fields = ("run__id",)
    exact_search_fields = ("run_id",)
    search_help_text = _("Exact, case-sensitive run id.")
