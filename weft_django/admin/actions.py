"""Admin actions on runs: each calls a public verb, so the protocol's rules apply
(cancel, suspend and purge rotate the claim's epoch; docs/ownership.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from .. import api
from ..exceptions import WeftError


def _apply(
    modeladmin: Any,
    request: HttpRequest,
    queryset: models.QuerySet,
    verb: str,
    fn: Callable[[str], None],
) -> None:
    """Call ``fn(run_id)`` (a public API verb) per run; report what happened."""
    done: list[str] = []
    refused: list[str] = []
    for run_id in queryset.values_list("pk", flat=True):
        try:
            fn(run_id)
        except WeftError as exc:
            refused.append(f"{run_id}: {exc}")
        else:
            done.append(run_id)
    if done:
        modeladmin.message_user(
            request,
            _("%(verb)s %(count)d run(s): %(ids)s")
            % {"verb": verb, "count": len(done), "ids": ", ".join(done[:20])},
            messages.SUCCESS,
        )
    for line in refused[:20]:
        modeladmin.message_user(request, line, messages.WARNING)


@admin.action(description=_("Cancel selected runs"), permissions=["operate"])
def cancel_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, "Cancelled", api.cancel)


@admin.action(description=_("Suspend selected runs"), permissions=["operate"])
def suspend_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, "Suspended", api.suspend)


@admin.action(description=_("Resume selected suspended runs"), permissions=["operate"])
def resume_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, "Resumed", api.resume)


@admin.action(description=_("Purge selected runs and their history"), permissions=["operate"])
def purge_runs(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _apply(modeladmin, request, queryset, "Purged", api.purge)
