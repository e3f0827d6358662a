"""Admin actions on runs: each is a :mod:`weft_django.operations` batch, so the
protocol's rules apply (cancel, suspend and purge rotate the claim's epoch;
docs/ownership.md) and every run changed is recorded (a ``LogEntry`` for the
acting user and a log line, with the reason typed in the action bar or on the
confirmation page).

Safety rules:

* suspend / resume need the custom ``operate_workflowrun`` permission;
  cancel (irreversible) needs it and ``delete_workflowrun``, purge
  (irreversible, deletes the history) ``delete_workflowrun``; both first show a
  confirmation page that lists the runs, as Django's own delete action does.
* A batch is at most :data:`MAX_ACTION_RUNS` runs; a larger selection is refused
  with nothing changed.
* Each run is its own try: any exception (not only ``WeftError``) is caught,
  logged and reported against that run, and the batch carries on, so every
  run of the batch is reported as done or failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from .. import operations
from ..models import UpdateRequest, WorkflowEvent, WorkflowSignal, db_for
from .forms import ReasonForm

#: The most runs one admin action request handles (each is its own operation);
#: a selection rule of the admin, not a batch size of a pass.
MAX_ACTION_RUNS = 500

#: The admin's words for what each operation did.
VERBS = {
    "cancel": _("Cancelled"),
    "suspend": _("Suspended"),
    "resume": _("Resumed"),
    "purge": _("Purged"),
}


@dataclass
class BatchReport:
    """A batch's result, told to the operator: every run done, every run not."""

    result: operations.BatchResult

    def send(self, modeladmin: Any, request: HttpRequest) -> None:
        result = self.result
        if result.done:
            modeladmin.message_user(
                request,
                _g("%(verb)s %(count)d run(s): %(ids)s")
                % {
                    "verb": VERBS[result.operation],
                    "count": len(result.done),
                    "ids": ", ".join(result.done),
                },
                messages.SUCCESS,
            )
        if result.failed:
            modeladmin.message_user(
                request,
                _g("%(count)d run(s) failed, nothing changed for them:")
                % {"count": len(result.failed)},
                messages.ERROR,
            )
        for run_id, error in result.failed:
            modeladmin.message_user(
                request,
                _g("run %(run)s: %(error)s")
                % {"run": run_id, "error": f"{type(error).__name__}: {error}"},
                messages.ERROR,
            )


def run_batch(
    operation: str, run_ids: list[str], request: HttpRequest, reason: str | None
) -> BatchReport:
    """``operation`` on each run, by the request's user, each in its own try."""
    return BatchReport(
        operations.batch(operation, run_ids, reason=reason, by=request.user, using=db_for(None))
    )


def batch_ids(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> list[str] | None:
    """The selected run ids, or None (with an error shown) past :data:`MAX_ACTION_RUNS`."""
    run_ids = list(queryset.order_by("pk").values_list("pk", flat=True)[: MAX_ACTION_RUNS + 1])
    if len(run_ids) > MAX_ACTION_RUNS:
        modeladmin.message_user(
            request,
            _g("Select at most %(max)d runs per action; nothing was changed.")
            % {"max": MAX_ACTION_RUNS},
            messages.ERROR,
        )
        return None
    return run_ids


def _apply(
    modeladmin: Any, request: HttpRequest, queryset: models.QuerySet, operation: str
) -> None:
    run_ids = batch_ids(modeladmin, request, queryset)
    if run_ids is None:
        return
    form = ReasonForm(request.POST)
    if not form.is_valid():
        modeladmin.message_user(
            request, _g("The reason is too long; nothing was changed."), messages.ERROR
        )
        return
    run_batch(operation, run_ids, request, form.cleaned_data["reason"]).send(modeladmin, request)


@admin.action(description=_("Suspend selected runs"), permissions=["operate"])
def suspend_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, "suspend")


@admin.action(description=_("Resume selected suspended runs"), permissions=["operate"])
def resume_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, "resume")


def _history_count(model: type[models.Model]) -> Coalesce:
    return Coalesce(
        Subquery(
            model._default_manager.filter(run=OuterRef("pk"))
            .order_by()
            .values("run")
            .annotate(n=Count("*"))
            .values("n")
        ),
        0,
    )


def confirmed(
    modeladmin: Any, request: HttpRequest, operation: str, run_ids: list[str]
) -> tuple[bool, ReasonForm]:
    """Whether the confirmation page was submitted (``post=yes``, a valid reason);
    if so, the operation is done and reported. The form, to show again otherwise."""
    initial = {"reason": request.POST.get("reason", "")}
    if request.POST.get("post") != "yes":
        return False, ReasonForm(initial=initial)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        return False, form
    run_batch(operation, run_ids, request, form.cleaned_data["reason"]).send(modeladmin, request)
    return True, form


def confirmation_page(
    modeladmin: Any,
    request: HttpRequest,
    operation: str,
    runs: models.QuerySet,
    run_ids: list[str],
    form: ReasonForm,
    *,
    batch: bool,
    back_url: str = "",
) -> TemplateResponse:
    """The page that asks before an irreversible operation (cancel, purge): the
    runs it would change (and which of them it would refuse), a reason field,
    and a POST form (``post=yes``) that does it. ``batch``: the form posts back
    to the changelist's action with the selected ids (else to this page's URL)."""
    rows = list(
        runs.order_by("pk").annotate(
            event_count=_history_count(WorkflowEvent),
            signal_count=_history_count(WorkflowSignal),
            update_count=_history_count(UpdateRequest),
        )
    )
    entries = [(run, operations.refusal(operation, run.pk, run.status)) for run in rows]
    titles = {
        "cancel": _g("Cancel %(count)d run(s)?"),
        "purge": _g("Purge %(count)d run(s)?"),
    }
    opts = modeladmin.model._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": titles[operation] % {"count": len(run_ids)},
        "subtitle": None,
        "opts": opts,
        "runs": rows,
        "entries": entries,
        "refused": sum(1 for _, refusal in entries if refusal is not None),
        "run_ids": run_ids,
        "form": form,
        "batch": batch,
        "back_url": back_url,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media,
    }
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(
        request, f"admin/weft_django/workflowrun/{operation}_confirmation.html", context
    )


def _confirm_then(
    modeladmin: Any, request: HttpRequest, queryset: models.QuerySet, operation: str
) -> TemplateResponse | None:
    run_ids = batch_ids(modeladmin, request, queryset)
    if run_ids is None:
        return None
    done, form = confirmed(modeladmin, request, operation, run_ids)
    if done:
        return None
    runs = (
        queryset.model.objects.using(queryset.db)
        .filter(pk__in=run_ids)
        .only("pk", "workflow_name", "status")
    )
    return confirmation_page(modeladmin, request, operation, runs, run_ids, form, batch=True)


@admin.action(description=_("Cancel selected runs"), permissions=["cancel"])
def cancel_runs(
    modeladmin: Any, request: HttpRequest, queryset: models.QuerySet
) -> TemplateResponse | None:
    """Irreversible: first a page listing what is cancelled, then (``post=yes``) the cancel."""
    return _confirm_then(modeladmin, request, queryset, "cancel")


@admin.action(description=_("Purge selected runs and their history"), permissions=["purge"])
def purge_runs(
    modeladmin: Any, request: HttpRequest, queryset: models.QuerySet
) -> TemplateResponse | None:
    """Irreversible: first a page listing what goes, then (``post=yes``) the purge."""
    return _confirm_then(modeladmin, request, queryset, "purge")
