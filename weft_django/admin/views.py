"""The operator's pages: the overview, and the extra parts of the engine page
(the run page is :mod:`.run_page`).

* :class:`OverviewAdmin` serves ``/admin/weft_django/overview/`` (a table-less
  model, so the admin index links it); viewing it needs ``view_workflowrun``.
* :class:`EnginePageMixin` adds the engine's held claims (paginated) and its
  last pass results to the engine page.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext as _g

from ..models import Claim, Overview, WorkflowRun, db_for
from .display import request_db_now
from .guards import clean_object_id
from .overview import DEFAULT_PENDING_AGE, overview_data, pass_rows
from .permissions import engine_permission, operate_permission, payload_permission
from .scale import PAGES_AHEAD, AdminMixinBase, CappedPaginator, render_with_index_order

CLAIMS_PER_PAGE = 100


@admin.register(Overview)
class OverviewAdmin(admin.ModelAdmin):
    """One screen: engines, runs by status, stuck claims, recent trouble, old messages."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(f"{WorkflowRun._meta.app_label}.view_workflowrun")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "",
                self.admin_site.admin_view(self.changelist_view),
                name="{}_{}_changelist".format(*info),
            )
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return render_with_index_order(request, lambda: self._overview(request, extra_context))

    def _overview(self, request: HttpRequest, extra_context: dict[str, Any] | None) -> HttpResponse:
        try:
            seconds = float(request.GET.get("older_than", ""))
        except ValueError:
            seconds = -1.0
        age = timedelta(seconds=seconds) if 0 <= seconds <= 30 * 86400 else DEFAULT_PENDING_AGE
        using = db_for(None)
        data = overview_data(request_db_now(request), pending_age=age, using=using)
        data["recent_sections"] = [
            (
                _g("Suspended in the last day"),
                data["suspended_runs"],
                data["suspended_count"],
                "suspended",
            ),
            (_g("Failed in the last day"), data["failed_runs"], data["failed_count"], "failed"),
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": _g("Weft overview"),
            "subtitle": None,
            "opts": self.opts,
            "has_operate_permission": operate_permission(request),
            "show_engines": engine_permission(request),
            "show_payloads": payload_permission(request),
            **data,
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/weft_django/overview.html", context)


class EnginePageMixin(AdminMixinBase):
    """The engine page: its claims (100 a page, by workflow id) and last passes."""

    change_form_template = "admin/weft_django/engine/change_form.html"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # 403 without the permission, whether the engine exists or not; then 404
        # for an id no engine can have (before any query).
        if not self.has_view_permission(request):
            raise PermissionDenied
        engine_id = clean_object_id(object_id, self.model)
        using = db_for(None)
        claims = (
            Claim.objects.using(using)
            .filter(holder_id=engine_id)
            .order_by("workflow_id")
            .only("workflow_id", "epoch", "claimed_at", "holder_id")
        )
        try:
            wanted = max(int(request.GET.get("claims_page", 1)), 1)
        except ValueError:
            wanted = 1
        # Counted only a few pages ahead: an engine may hold 100,000 parked runs.
        paginator = CappedPaginator(
            claims, CLAIMS_PER_PAGE, probe=(wanted + PAGES_AHEAD) * CLAIMS_PER_PAGE
        )
        page = paginator.get_page(wanted)
        engine_passes = (
            self.model.objects.using(using)
            .filter(pk=engine_id)
            .values_list("passes", flat=True)
            .first()
        )
        context = {
            "claims_page": page,
            "pass_rows": pass_rows(engine_passes),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)
