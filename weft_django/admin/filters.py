"""List filters on the lease-state annotations the admin's querysets make."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from ..ownership.leases import LeaseState


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


class EngineLeaseStateFilter(LeaseStateFilter):
    states = (LeaseState.LIVE, LeaseState.EXPIRED)


class OwnerLeaseStateFilter(LeaseStateFilter):
    title = _("owner lease")
    parameter_name = "owner_lease"
    annotation = "owner_lease_state"
