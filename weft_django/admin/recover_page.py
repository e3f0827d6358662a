"""The run page's recovery operations: retry, fork from a step, cancel with
children -- each behind a confirmation page (docs/admin.md, "Retry, fork,
cancel with children").

They go through :mod:`weft_django.recovery`, as ``weft.retry``, ``weft.fork``,
``weft.cancel(children=True)`` and ``manage.py weft`` do, recorded with the
acting user and the optional reason (a ``LogEntry`` on the run acted on).
Retry and fork start a run, so they need ``operate_workflowrun`` and
``add_workflowrun`` (:func:`~.permissions.recover_permission`); cancel with
children needs what cancel needs. The page also shows the run's links: the
run it was retried or forked from, and its own retries and forks.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from .. import recovery
from ..models import WorkflowRun, db_for
from ..operations import refusal
from ..runtime.recovery import FORKABLE, RETRYABLE
from .forms import reason_field
from .guards import clean_object_id
from .permissions import cancel_permission, recover_permission
from .scale import AdminMixinBase

#: The recovery operations: their button, and which run statuses they apply to.
RECOVER = {
    "retry": (_("Retry\u2026"), RETRYABLE),
    "fork": (_("Fork from a step\u2026"), FORKABLE),
    "cancel_tree": (_("Cancel with children\u2026"), None),
}
RECOVER_URL = "admin:weft_django_workflowrun_recover"
#: The retries and forks of a run listed on its page.
COPIES_LIMIT = 20


def applies(verb: str, status: str) -> bool:
    statuses = RECOVER[verb][1]
    if statuses is None:  # cancel with children: where cancel applies
        return refusal("cancel", "", status) is None
    return status in statuses


def permitted(verb: str, request: HttpRequest) -> bool:
    return (cancel_permission if verb == "cancel_tree" else recover_permission)(request)


class RecoverForm(forms.Form):
    reason = reason_field()


class ForkForm(RecoverForm):
    from_step = forms.IntegerField(
        label=_("From step"),
        min_value=0,
        help_text=_(
            "Steps are counted from 0: steps before this one keep their recorded results "
            "and are not run again; this step and the rest run on today's code."
        ),
    )


def recovery_context(request: HttpRequest, run_id: str, status: str | None) -> dict[str, Any]:
    """The run page's recovery links and the run's links to other runs."""
    using = db_for(None)
    run = WorkflowRun.objects.using(using).filter(pk=run_id).values("origin_id", "origin_step")
    origin: dict[str, Any] = dict(run.first() or {})
    runs = WorkflowRun.objects.using(using)
    copies = list(
        runs.filter(origin_id=run_id)
        .order_by("created_at", "pk")
        .values_list("pk", "origin_step")[:COPIES_LIMIT]
    )
    offered = [
        verb for verb in RECOVER if status and applies(verb, status) and permitted(verb, request)
    ]
    if "cancel_tree" in offered and not runs.filter(parent_id=run_id).exists():
        offered.remove("cancel_tree")  # no children: the Operate panel's cancel
    offers = [
        (verb, RECOVER[verb][0], reverse(RECOVER_URL, args=[quote(run_id), verb]))
        for verb in offered
    ]
    return {
        "recover_links": offers,
        "origin_id": origin.get("origin_id"),
        "origin_step": origin.get("origin_step"),
        "copies": copies,
    }


class RecoverPageMixin(AdminMixinBase):
    """``<run>/recover/<verb>/``: the confirmation page and the operation."""

    def get_urls(self) -> list[URLPattern]:
        info = WorkflowRun._meta.app_label, WorkflowRun._meta.model_name
        return [
            path(
                "<path:object_id>/recover/<str:verb>/",
                self.admin_site.admin_view(self.recover_view),
                name="{}_{}_recover".format(*info),
            ),
            *super().get_urls(),
        ]

    def recover_view(self, request: HttpRequest, object_id: str, verb: str) -> HttpResponse:
        if verb not in RECOVER:
            raise Http404(_g("Unknown operation."))
        if not (self.has_view_permission(request) and permitted(verb, request)):
            raise PermissionDenied
        run_id = clean_object_id(object_id, WorkflowRun)
        run = WorkflowRun.objects.using(db_for(None)).filter(pk=run_id).first()
        if run is None:
            raise Http404(_g("No workflow run with that id."))
        back = reverse("admin:weft_django_workflowrun_change", args=[quote(run.pk)])
        if request.method not in ("GET", "POST"):
            return HttpResponse(status=405)
        form_class = ForkForm if verb == "fork" else RecoverForm
        form = form_class(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            done = self._recover(request, verb, run, form)
            if done is not None:
                return HttpResponseRedirect(done)
        context = {
            **self.admin_site.each_context(request),
            "title": f"{RECOVER[verb][0]} {run.pk}".replace("\u2026", ""),
            "subtitle": None,
            "opts": WorkflowRun._meta,
            "original": run,
            "verb": verb,
            "applies": applies(verb, run.status),
            "form": form,
            "back_url": back,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, "admin/weft_django/workflowrun/recover_confirmation.html", context
        )

    def _recover(
        self, request: HttpRequest, verb: str, run: WorkflowRun, form: forms.Form
    ) -> str | None:
        """Do it; the URL to go to, or None (the error is on the form)."""
        data = form.cleaned_data
        common: dict[str, Any] = {
            "reason": data["reason"] or None,
            "by": request.user,
            "using": db_for(None),
        }
        try:
            if verb == "retry":
                new: str | None = recovery.retry(run.pk, **common)
            elif verb == "fork":
                new = recovery.fork(run.pk, data["from_step"], **common)
            else:
                tree = recovery.cancel_tree(run.pk, **common)
                new = None
        except Exception as exc:
            form.add_error(None, f"{type(exc).__name__}: {exc}")
            return None
        if new is not None:
            self.message_user(
                request, _g("Started run %(new)s from %(run)s.") % {"new": new, "run": run.pk}
            )
            return reverse("admin:weft_django_workflowrun_change", args=[quote(new)])
        message = _g("Cancelled %(run)s and %(count)d descendant(s).") % {
            "run": run.pk,
            "count": len(tree.cancelled) - 1,
        }
        for pk, error in tree.failed:
            message += f" {pk}: {type(error).__name__}: {error}."
        self.message_user(request, message)
        return reverse("admin:weft_django_workflowrun_change", args=[quote(run.pk)])
