"""Admin actions on runs: each calls a public verb, so the protocol's rules apply
(cancel, suspend and purge rotate the claim's epoch; docs/ownership.md).

Safety rules:

* cancel / suspend / resume need the custom ``operate_workflowrun`` permission;
  purge (irreversible) needs ``delete_workflowrun`` and a confirmation page
  that lists what will be deleted, as Django's own delete action does.
* A batch is at most :data:`MAX_BATCH` runs; a larger selection is refused
  with nothing changed.
* Each run is its own try: any exception (not only ``WeftError``) is caught,
  logged and reported against that run, and the batch carries on, so every
  run of the batch is reported as done or failed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
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

from .. import api
from ..exceptions import WeftError
from ..models import UpdateRequest, WorkflowEvent, WorkflowSignal

logger = logging.getLogger("weft_django.admin")

#: The most runs one action request handles (each is its own API call).
MAX_BATCH = 500


@dataclass
class BatchReport:
    """Which runs a batch changed and which it did not (with the error)."""

    verb: str
    done: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def send(self, modeladmin: Any, request: HttpRequest) -> None:
        if self.done:
            modeladmin.message_user(
                request,
                _g("%(verb)s %(count)d run(s): %(ids)s")
                % {"verb": self.verb, "count": len(self.done), "ids": ", ".join(self.done)},
                messages.SUCCESS,
            )
        if self.failed:
            modeladmin.message_user(
                request,
                _g("%(count)d run(s) failed, nothing changed for them:")
                % {"count": len(self.failed)},
                messages.ERROR,
            )
        for run_id, error in self.failed:
            modeladmin.message_user(
                request,
                _g("run %(run)s: %(error)s") % {"run": run_id, "error": error},
                messages.ERROR,
            )


def run_batch(verb: str, run_ids: list[str], fn: Callable[[str], None]) -> BatchReport:
    """Call ``fn(run_id)`` per run, each in its own try; report every run."""
    report = BatchReport(verb)
    for run_id in run_ids:
        try:
            fn(run_id)
        except Exception as exc:
            if not isinstance(exc, WeftError):  # a refusal is expected; a crash is logged
                logger.exception("admin action %s failed on run %s", verb, run_id)
            report.failed.append((run_id, f"{type(exc).__name__}: {exc}"))
        else:
            report.done.append(run_id)
    return report


def batch_ids(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> list[str] | None:
    """The selected run ids, or None (with an error shown) past :data:`MAX_BATCH`."""
    run_ids = list(queryset.order_by("pk").values_list("pk", flat=True)[: MAX_BATCH + 1])
    if len(run_ids) > MAX_BATCH:
        modeladmin.message_user(
            request,
            _g("Select at most %(max)d runs per action; nothing was changed.") % {"max": MAX_BATCH},
            messages.ERROR,
        )
        return None
    return run_ids


def _apply(
    modeladmin: Any,
    request: HttpRequest,
    queryset: models.QuerySet,
    verb: str,
    fn: Callable[[str], None],
) -> None:
    run_ids = batch_ids(modeladmin, request, queryset)
    if run_ids is not None:
        run_batch(verb, run_ids, fn).send(modeladmin, request)


@admin.action(description=_("Cancel selected runs"), permissions=["operate"])
def cancel_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, _g("Cancelled"), api.cancel)


@admin.action(description=_("Suspend selected runs"), permissions=["operate"])
def suspend_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, _g("Suspended"), api.suspend)


@admin.action(description=_("Resume selected suspended runs"), permissions=["operate"])
def resume_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, _g("Resumed"), api.resume)


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


@admin.action(description=_("Purge selected runs and their history"), permissions=["purge"])
def purge_runs(
    modeladmin: Any, request: HttpRequest, queryset: models.QuerySet
) -> TemplateResponse | None:
    """Irreversible: first a page listing what goes, then (``post=yes``) the purge."""
    run_ids = batch_ids(modeladmin, request, queryset)
    if run_ids is None:
        return None
    if request.POST.get("post") == "yes":
        run_batch(_g("Purged"), run_ids, api.purge).send(modeladmin, request)
        return None
    runs = (
        queryset.model.objects.using(queryset.db)
        .filter(pk__in=run_ids)
        .order_by("pk")
        .annotate(
            event_count=_history_count(WorkflowEvent),
            signal_count=_history_count(WorkflowSignal),
            update_count=_history_count(UpdateRequest),
        )
        .only("pk", "workflow_name", "status")
    )
    opts = modeladmin.model._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": _g("Purge %(count)d run(s)?") % {"count": len(run_ids)},
        "subtitle": None,
        "opts": opts,
        "runs": runs,
        "run_ids": run_ids,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media,
    }
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(
        request, "admin/weft_django/workflowrun/purge_confirmation.html", context
    )
