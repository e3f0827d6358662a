"""The admin's ModelAdmins of engine state: who holds what, read-only.

Engine state (engines, claims, the ownership-mode marker, the global lease)
and run history are written only by engines; the admin shows them and never
adds, changes or deletes a row. Every changelist is a constant number of
queries: related rows come from ``select_related``, counts and owners from
annotations, and lease states from one SQL expression judged against a single
reading of the database clock per request.

The runs and their history are in :mod:`.runs`; the overview and the extra
parts of the engine and run pages in :mod:`.views`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.db import models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Cast, Coalesce
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from ..conf import get_settings
from ..exceptions import WeftConfigurationError
from ..models import (
    Claim,
    Engine,
    GlobalLease,
    OwnershipMarker,
    WorkflowRun,
)
from ..ownership import lease_state_expression, ownership_class, read_marker
from .display import (
    admin_link,
    engine_label,
    precise,
    render_lease_state,
    request_cutoff,
)
from .filters import ClaimLeaseStateFilter, EngineLeaseStateFilter
from .guards import GuardedAdminMixin
from .scale import CappedCountMixin, ExactSearchMixin
from .views import EnginePageMixin


class ReadOnlyAdminMixin(GuardedAdminMixin):
    """View only: no add, change or delete, and so no bulk delete action; and
    the guards of :mod:`.guards` (view permission, lookups, ids, hidden fields)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# -- ownership state ---------------------------------------------------------------


@admin.register(Engine)
class EngineAdmin(EnginePageMixin, ExactSearchMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "hostname",
        "pid",
        "kind",
        "ownership_mode",
        "status",
        "started_at",
        "heartbeat",
        "lease_expires",
        "lease_state_display",
        "claims_held_display",
    )
    list_filter = ("status", "kind", "ownership_mode", EngineLeaseStateFilter)
    search_fields = ("id",)
    exact_search_fields = ("id", "hostname")
    readonly_fields = ("lease_state_display", "claims_held_display")
    ordering = ("-started_at",)

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        settings = get_settings()
        cutoff_at = request_cutoff(request, ownership_class(settings.ownership).timing_of(settings))
        return (
            super()
            .get_queryset(request)
            .annotate(
                # A correlated COUNT rather than a JOIN + GROUP BY, so the
                # changelist's COUNT(*) and the filter queries never touch claims.
                claims_held=Coalesce(
                    Subquery(
                        Claim.objects.filter(holder=OuterRef("pk"))
                        .order_by()
                        .values("holder")
                        .annotate(n=Count("*"))
                        .values("n")
                    ),
                    0,
                ),
                lease_state=lease_state_expression("lease_expires_at", cutoff_at),
            )
        )

    @admin.display(description=_("heartbeat"), ordering="heartbeat_at")
    def heartbeat(self, obj: Engine) -> str:
        return precise(obj.heartbeat_at)

    @admin.display(description=_("lease expires"), ordering="lease_expires_at")
    def lease_expires(self, obj: Engine) -> str:
        return precise(obj.lease_expires_at)

    @admin.display(description=_("lease"), ordering="lease_state")
    def lease_state_display(self, obj: Engine) -> str:
        return render_lease_state(getattr(obj, "lease_state", None))

    @admin.display(description=_("claims held"), ordering="claims_held")
    def claims_held_display(self, obj: Engine) -> str:
        count = getattr(obj, "claims_held", 0)
        url = reverse("admin:weft_django_claim_changelist")
        query = urlencode({"holder__id__exact": obj.pk})
        return format_html('<a href="{}?{}">{}</a>', url, query, count)


@admin.register(Claim)
class ClaimAdmin(CappedCountMixin, ExactSearchMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "workflow_id",
        "run_display",
        "epoch",
        "holder_display",
        "claimed",
        "lease_state_display",
        "holder_lease_expires_at",
    )
    list_filter = (ClaimLeaseStateFilter,)
    extra_lookups = ("holder__id__exact",)  # the engine list's and overview's links
    engine_fields = ("holder", "holder_display")
    # Sorting a million rows by anything but an index is a full sort.
    sortable_by = ("workflow_id",)
    search_fields = ("workflow_id",)
    exact_search_fields = ("workflow_id", "holder_id")
    readonly_fields = ("run_display", "lease_state_display", "holder_lease_expires_at")

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        cutoff_at = request_cutoff(request, get_settings().claim_timing)
        return (
            super()
            .get_queryset(request)
            .select_related("holder")
            .annotate(
                lease_state=lease_state_expression(
                    "holder__lease_expires_at", cutoff_at, held_field="holder"
                ),
                # A LIMIT 1 subquery, evaluated for the page's rows only (an EXISTS
                # may be planned as a hash of the whole run table).
                run_exists=Subquery(
                    WorkflowRun.objects.filter(pk=OuterRef("workflow_id"))
                    .order_by()
                    .values("pk")[:1]
                ),
            )
        )

    @admin.display(description=_("run"))
    def run_display(self, obj: Claim) -> str:
        if getattr(obj, "run_exists", False):
            return admin_link(WorkflowRun, obj.workflow_id, _("view run"))
        return str(_("purged / none"))

    @admin.display(description=_("holder"), ordering="holder_id")
    def holder_display(self, obj: Claim) -> str:
        holder = obj.holder
        return engine_label(holder.pk, holder.hostname) if holder else "-"

    @admin.display(description=_("lease"), ordering="lease_state")
    def lease_state_display(self, obj: Claim) -> str:
        return render_lease_state(getattr(obj, "lease_state", None))

    @admin.display(description=_("claimed at"), ordering="claimed_at")
    def claimed(self, obj: Claim) -> str:
        return precise(obj.claimed_at)

    @admin.display(description=_("holder lease expires"), ordering="holder__lease_expires_at")
    def holder_lease_expires_at(self, obj: Claim) -> str:
        return precise(obj.holder.lease_expires_at if obj.holder else None)


@admin.register(OwnershipMarker)
class OwnershipMarkerAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The marker, shown even when it cannot be decoded (with the repair hint).

    ``established_at`` is read as text, so an impossible timestamp stored on
    SQLite (which the driver would fail to convert) still lists.
    """

    list_display = ("mode", "established", "established_by", "matches_configured_mode")

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        return (
            super()
            .get_queryset(request)
            .defer("established_at")
            .annotate(established_text=Cast("established_at", output_field=models.TextField()))
        )

    @admin.display(description=_("established at"), ordering="established_at")
    def established(self, obj: OwnershipMarker) -> str:
        text = getattr(obj, "established_text", None)
        try:
            parsed = parse_datetime(text or "")
        except ValueError:
            parsed = None
        if parsed is None:
            return format_html("{} <strong>({})</strong>", text, _("undecodable"))
        return precise(parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed))

    @admin.display(description=_("matches WEFT['OWNERSHIP']"), boolean=True)
    def matches_configured_mode(self, obj: OwnershipMarker) -> bool | None:
        try:
            return obj.mode == get_settings().ownership
        except WeftConfigurationError:
            return None

    def marker_error(self, request: HttpRequest) -> str | None:
        try:
            read_marker()
        except WeftConfigurationError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return str(exc)
        return None

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self.marker_error(request)
        return super().changelist_view(request, extra_context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if self.marker_error(request) is not None:
            return HttpResponseRedirect(reverse("admin:weft_django_ownershipmarker_changelist"))
        return super().change_view(request, object_id, form_url, extra_context)


@admin.register(GlobalLease)
class GlobalLeaseAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "epoch",
        "holder_display",
        "acquired",
        "expires",
        "lease_state_display",
    )
    readonly_fields = ("lease_state_display",)
    engine_fields = ("holder", "holder_display")

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        cutoff_at = request_cutoff(request, get_settings().lease_timing)
        return (
            super()
            .get_queryset(request)
            .select_related("holder")
            .annotate(
                lease_state=lease_state_expression("expires_at", cutoff_at, held_field="holder")
            )
        )

    @admin.display(description=_("holder"), ordering="holder_id")
    def holder_display(self, obj: GlobalLease) -> str:
        holder = obj.holder
        return engine_label(holder.pk, holder.hostname) if holder else "-"

    @admin.display(description=_("acquired at"), ordering="acquired_at")
    def acquired(self, obj: GlobalLease) -> str:
        return precise(obj.acquired_at)

    @admin.display(description=_("expires at"), ordering="expires_at")
    def expires(self, obj: GlobalLease) -> str:
        return precise(obj.expires_at)

    @admin.display(description=_("lease"), ordering="lease_state")
    def lease_state_display(self, obj: GlobalLease) -> str:
        return render_lease_state(getattr(obj, "lease_state", None))
