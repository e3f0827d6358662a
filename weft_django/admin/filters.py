"""List filters: lease states (annotations the admin's querysets make) and
static choices (no ``SELECT DISTINCT`` over a big table on every page)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from ..conf import get_settings
from ..models import Claim
from ..ownership import LeaseState
from .display import request_cutoff
from .scale import StaticChoicesFilter


class LeaseStateFilter(admin.SimpleListFilter):
    """Filter on a ``lease_state``-style annotation made by the admin's ``get_queryset``."""

    title = _("lease state")
    parameter_name = "lease_state"
    annotation = "lease_state"
    states: tuple[LeaseState, ...] = (LeaseState.LIVE, LeaseState.EXPIRED, LeaseState.UNHELD)

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [(state.value, state.label) for state in self.states]

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        value = self.value()
        if value in {state.value for state in self.states}:
            return queryset.filter(**{self.annotation: value})
        return queryset


class ClaimLeaseStateFilter(LeaseStateFilter):
    """A claim's holder lease as plain conditions on the join (an index range on
    the engines' lease expiry), not a filter on the per-row CASE annotation."""

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        value = self.value()
        if value == LeaseState.UNHELD:
            return queryset.filter(holder__isnull=True)
        cutoff_at = request_cutoff(request, get_settings().claim_timing)
        if value == LeaseState.EXPIRED:
            return queryset.filter(holder__lease_expires_at__lt=cutoff_at)
        if value == LeaseState.LIVE:
            return queryset.filter(holder__lease_expires_at__gte=cutoff_at)
        return queryset


class EngineLeaseStateFilter(LeaseStateFilter):
    states = (LeaseState.LIVE, LeaseState.EXPIRED)


class OwnerLeaseStateFilter(LeaseStateFilter):
    """A run's owner lease, as a semi-join on the claim table (not a filter on the
    per-row annotation, which the database would evaluate row by row over the
    whole run table to find a rare state)."""

    title = _("owner lease")
    parameter_name = "owner_lease"
    annotation = "owner_lease_state"

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        value = self.value()
        if value not in {state.value for state in self.states}:
            return queryset
        claims = Claim.objects.using(queryset.db)
        if value == LeaseState.UNHELD:
            held = claims.filter(holder__isnull=False)
            return queryset.exclude(pk__in=held.values("workflow_id"))
        cutoff_at = request_cutoff(request, get_settings().claim_timing)
        if value == LeaseState.EXPIRED:
            owned = claims.filter(holder__lease_expires_at__lt=cutoff_at)
        else:
            owned = claims.filter(holder__lease_expires_at__gte=cutoff_at)
        return queryset.filter(pk__in=owned.values("workflow_id"))


def _registered_workflows() -> list[tuple[str, str]]:
    from ..runtime.registry import registered_names

    return [(name, name) for name in sorted(registered_names())]


#: Every kind of history event the runtime records (weft_django/runtime/).
EVENT_KINDS = (
    "step",
    "retry_wait",
    "sleep",
    "wait",
    "signal",
    "update",
    "update_wait",
    "update_response",
    "until",
    "child_start",
    "child_result",
    "now",
    "uuid4",
    "random",
    "patch",
)


class WorkflowNameFilter(StaticChoicesFilter):
    """The registered workflow names (runs of an unregistered name: search by it)."""

    title = _("workflow")
    parameter_name = "workflow_name"
    field = "workflow_name"
    static_choices = staticmethod(_registered_workflows)


class EventKindFilter(StaticChoicesFilter):
    title = _("kind")
    parameter_name = "kind"
    field = "kind"
    static_choices = tuple((kind, kind) for kind in EVENT_KINDS)
