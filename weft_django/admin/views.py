"""The operator's pages: the overview, and the extra parts of the engine and run pages.

* :class:`OverviewAdmin` serves ``/admin/weft_django/overview/`` (a table-less
  model, so the admin index links it); viewing it needs ``view_workflowrun``.
* :class:`EnginePageMixin` adds the engine's held claims (paginated) and its
  last pass results to the engine page.
* :class:`RunPageMixin` replaces the run page's inlines (which rendered every
  event) with a paginated timeline, the owner with its lease left, pending
  signals and updates, cancel / suspend / resume buttons and a send-signal
  form. Every change is a POST (CSRF-checked by ``admin_view``), needs
  ``operate_workflowrun``, and goes through the public API.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext as _g
from django.views.decorators.http import require_POST

from .. import api
from ..models import Claim, Overview, WorkflowRun, db_for
from .display import request_db_now
from .forms import SendSignalForm
from .overview import DEFAULT_PENDING_AGE, overview_data, pass_rows
from .scale import PAGES_AHEAD, AdminMixinBase, CappedPaginator, render_with_index_order
from .timeline import lease_left, pending_for, timeline_page

CLAIMS_PER_PAGE = 100
OPERATIONS = {"cancel": api.cancel, "suspend": api.suspend, "resume": api.resume}


def operate_permission(request: HttpRequest) -> bool:
    return request.user.has_perm(f"{WorkflowRun._meta.app_label}.operate_workflowrun")


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
        using = db_for(None)
        engine_id = unquote(object_id)
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


class RunPageMixin(AdminMixinBase):
    """The run page's timeline, owner, pending messages and operations."""

    change_form_template = "admin/weft_django/workflowrun/change_form.html"

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        info = WorkflowRun._meta.app_label, WorkflowRun._meta.model_name
        return [
            path(
                "<path:object_id>/operate/<str:verb>/",
                wrap(self.operate_view),
                name="{}_{}_operate".format(*info),
            ),
            path(
                "<path:object_id>/signal/",
                wrap(self.send_signal_view),
                name="{}_{}_signal".format(*info),
            ),
            *super().get_urls(),
        ]

    def _run_or_404(self, request: HttpRequest, object_id: str) -> WorkflowRun:
        run = WorkflowRun.objects.using(db_for(None)).filter(pk=unquote(object_id)).first()
        if run is None:
            raise Http404(_g("No workflow run with that id."))
        if not self.has_view_permission(request, run):
            raise PermissionDenied
        return run

    def _change_url(self, run_id: str) -> str:
        return reverse("admin:weft_django_workflowrun_change", args=[quote(run_id)])

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        using = db_for(None)
        run_id = unquote(object_id)
        now = request_db_now(request)
        claim = Claim.objects.using(using).select_related("holder").filter(pk=run_id).first()
        page, rows = timeline_page(run_id, request.GET.get("events_page"), using=using)
        context = {
            "claim": claim,
            "holder_lease_left": lease_left(
                claim.holder.lease_expires_at if claim and claim.holder else None, now
            ),
            "events_page": page,
            "timeline": rows,
            "signal_form": SendSignalForm(),
            "operate_buttons": [
                ("cancel", _g("Cancel run")),
                ("suspend", _g("Suspend")),
                ("resume", _g("Resume")),
            ],
            "has_operate_permission": operate_permission(request),
            **pending_for(run_id, using=using),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)

    def operate_view(self, request: HttpRequest, object_id: str, verb: str) -> HttpResponse:
        return require_POST(self._operate)(request, object_id, verb)

    def _operate(self, request: HttpRequest, object_id: str, verb: str) -> HttpResponse:
        run = self._run_or_404(request, object_id)
        if not operate_permission(request):
            raise PermissionDenied
        fn = OPERATIONS.get(verb)
        if fn is None:
            raise Http404(_g("Unknown operation."))
        try:
            fn(run.pk, using=db_for(None))
        except Exception as exc:
            self.message_user(
                request, f"{verb} {run.pk}: {type(exc).__name__}: {exc}", messages.ERROR
            )
        else:
            self.message_user(
                request, _g("%(verb)s: done for %(run)s") % {"verb": verb, "run": run.pk}
            )
        return HttpResponseRedirect(self._change_url(run.pk))

    def send_signal_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        run = self._run_or_404(request, object_id)
        if not operate_permission(request):
            raise PermissionDenied
        form = SendSignalForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                api.signal(
                    run.pk,
                    data["name"],
                    data["payload"],
                    signal_id=data["signal_id"],
                    using=db_for(None),
                )
            except Exception as exc:
                form.add_error(None, f"{type(exc).__name__}: {exc}")
            else:
                self.message_user(
                    request,
                    _g("Signal %(name)s sent to %(run)s.") % {"name": data["name"], "run": run.pk},
                )
                return HttpResponseRedirect(self._change_url(run.pk))
        context = {
            **self.admin_site.each_context(request),
            "title": _g("Send a signal to %(run)s") % {"run": run.pk},
            "subtitle": None,
            "opts": WorkflowRun._meta,
            "original": run,
            "form": form,
            "change_url": self._change_url(run.pk),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/weft_django/workflowrun/send_signal.html", context)
