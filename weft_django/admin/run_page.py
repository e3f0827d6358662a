"""The run page: a paginated timeline, the owner with its lease left, pending
signals and updates, and the operations that apply to the run's status.

Which operations apply to which status is :data:`weft_django.operations.APPLIES_TO`:
the page offers only those (cancel, suspend and the signal form on a live run;
resume and cancel on a suspended one; nothing on a finished one), and each view
checks it again and refuses with the operation's own message. Every change is
a POST (CSRF-checked by ``admin_view``) through :mod:`weft_django.operations`,
recorded with the acting user and the optional reason. Cancel (irreversible)
goes through the same confirmation page as the run list's cancel action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from .. import operations
from ..models import TERMINAL_STATUSES, Claim, WorkflowRun, db_for
from .actions import VERBS, confirmation_page, confirmed
from .display import request_db_now
from .forms import ReasonForm, SendSignalForm
from .guards import clean_object_id
from .permissions import (
    PERMISSION_OF,
    cancel_permission,
    engine_permission,
    operate_permission,
    payload_permission,
)
from .pictures import timeline_picture
from .recover_page import RecoverPageMixin, recovery_context
from .timeline import lease_left, pending_for, timeline_page

#: The run page's buttons (cancel is a link to its confirmation page).
BUTTONS = {
    "cancel": _("Cancel run\u2026"),
    "suspend": _("Suspend"),
    "resume": _("Resume"),
}


def offered(request: HttpRequest, status: str) -> list[str]:
    """The operations the page offers: those that apply to ``status`` and that
    the user may do."""
    return [op for op in operations.applicable(status) if PERMISSION_OF[op](request)]


class RunPageMixin(RecoverPageMixin):
    """The run page's timeline, owner, pending messages and operations (and,
    from :class:`~.recover_page.RecoverPageMixin`, retry, fork and cancel
    with children)."""

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
                "<path:object_id>/cancel/",
                wrap(self.cancel_view),
                name="{}_{}_cancel".format(*info),
            ),
            path(
                "<path:object_id>/signal/",
                wrap(self.send_signal_view),
                name="{}_{}_signal".format(*info),
            ),
            *super().get_urls(),
        ]

    def _run_or_404(
        self, request: HttpRequest, object_id: str, permission: Callable[[HttpRequest], bool]
    ) -> WorkflowRun:
        """The run, for a user with the view permission and ``permission``: 403
        without them whether the run exists or not (no existence check first),
        then 404 for a missing run or an id no run can have."""
        if not (self.has_view_permission(request) and permission(request)):
            raise PermissionDenied
        run_id = clean_object_id(object_id, WorkflowRun)
        run = WorkflowRun.objects.using(db_for(None)).filter(pk=run_id).first()
        if run is None:
            raise Http404(_g("No workflow run with that id."))
        return run

    def _change_url(self, run_id: str) -> str:
        return reverse("admin:weft_django_workflowrun_change", args=[quote(run_id)])

    def _refused(self, request: HttpRequest, operation: str, run: WorkflowRun) -> bool:
        """Whether ``operation`` does not apply to the run's status (told as an error)."""
        refusal = operations.refusal(operation, run.pk, run.status)
        if refusal is not None:
            self.message_user(request, str(refusal), messages.ERROR)
        return refusal is not None

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        run_id = clean_object_id(object_id, WorkflowRun)
        using = db_for(None)
        now = request_db_now(request)
        show_payloads = payload_permission(request)
        claim = Claim.objects.using(using).select_related("holder").filter(pk=run_id).first()
        page, rows = timeline_page(
            run_id, request.GET.get("events_page"), using=using, payloads=show_payloads
        )
        status = (
            WorkflowRun.objects.using(using)
            .filter(pk=run_id)
            .values_list("status", flat=True)
            .first()
        )
        offers = offered(request, status) if status else []
        # A run not finished waits (or runs) still: its last page's picture ends now.
        live_until = now if status not in TERMINAL_STATUSES and not page.has_next() else None
        context = {
            "claim": claim,
            "holder_lease_left": lease_left(
                claim.holder.lease_expires_at if claim and claim.holder else None, now
            ),
            "events_page": page,
            "timeline": rows,
            "timeline_picture": timeline_picture(
                rows, until=live_until, show_engines=engine_permission(request)
            ),
            "signal_form": SendSignalForm() if "signal" in offers else None,
            "reason_form": ReasonForm(auto_id="id_operate_%s"),
            "operate_buttons": [(op, label) for op, label in BUTTONS.items() if op in offers],
            "has_operate_permission": operate_permission(request),
            "show_payloads": show_payloads,
            "show_engines": engine_permission(request),
            # Those that apply at all (purge is the run list's action).
            "run_operations": [op for op in operations.applicable(status or "") if op != "purge"],
            **pending_for(run_id, using=using),
            **recovery_context(request, run_id, status),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)

    def operate_view(self, request: HttpRequest, object_id: str, verb: str) -> HttpResponse:
        return require_POST(self._operate)(request, object_id, verb)

    def _operate(self, request: HttpRequest, object_id: str, verb: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        if verb not in ("cancel", "suspend", "resume"):
            raise Http404(_g("Unknown operation."))
        run = self._run_or_404(request, object_id, PERMISSION_OF[verb])
        if verb == "cancel":  # irreversible: only through its confirmation page
            return HttpResponseRedirect(
                reverse("admin:weft_django_workflowrun_cancel", args=[quote(run.pk)])
            )
        form = ReasonForm(request.POST)
        if not form.is_valid():
            self.message_user(
                request, _g("The reason is too long; nothing was changed."), messages.ERROR
            )
        elif not self._refused(request, verb, run):
            self._do(request, verb, run.pk, form.cleaned_data["reason"])
        return HttpResponseRedirect(self._change_url(run.pk))

    def _do(self, request: HttpRequest, operation: str, run_id: str, reason: str | None) -> None:
        try:
            operations.operation_function(operation)(
                run_id, reason=reason, by=request.user, using=db_for(None)
            )
        except Exception as exc:
            self.message_user(request, f"{type(exc).__name__}: {exc}", messages.ERROR)
        else:
            self.message_user(
                request,
                _g("%(verb)s run %(run)s.") % {"verb": VERBS[operation], "run": run_id},
                messages.SUCCESS,
            )

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The run's cancel confirmation (GET) and the cancel itself (POST ``post=yes``)."""
        run = self._run_or_404(request, object_id, cancel_permission)
        back = self._change_url(run.pk)
        if request.method not in ("GET", "POST"):
            return HttpResponse(status=405)
        if self._refused(request, "cancel", run):
            return HttpResponseRedirect(back)
        if request.method == "POST":
            done, form = confirmed(self, request, "cancel", [run.pk])
            if done:
                return HttpResponseRedirect(back)
        else:
            form = ReasonForm()
        runs = WorkflowRun.objects.using(db_for(None)).filter(pk=run.pk)
        return confirmation_page(
            self, request, "cancel", runs, [run.pk], form, batch=False, back_url=back
        )

    def send_signal_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        run = self._run_or_404(request, object_id, operate_permission)
        if self._refused(request, "signal", run):
            return HttpResponseRedirect(self._change_url(run.pk))
        form = SendSignalForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                operations.signal(
                    run.pk,
                    data["name"],
                    data["payload"],
                    signal_id=data["signal_id"],
                    reason=data["reason"],
                    by=request.user,
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
