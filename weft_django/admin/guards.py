"""What every weft ModelAdmin refuses (docs/admin.md, "Permissions"):

* viewing without the model's own ``view_`` permission (Django would also let
  ``change_`` holders view; the admin edits no row, so ``change_`` allows nothing);
* query-string lookups other than the ones the page offers
  (:meth:`GuardedAdminMixin.lookup_allowed`): ``?id__regex=...`` is a
  ``DisallowedModelAdminLookup`` (400), not a query;
* object ids no row can have (a NUL character, longer than the primary key):
  404 before any query (PostgreSQL refuses a NUL in a parameter with an error,
  which would be a 500);
* a NUL in any query-string value of a changelist: the changelist's "invalid
  filter" answer (``?e=1``), without a query;
* payload fields (:attr:`GuardedAdminMixin.payload_fields`) without the payload
  permission, engine fields and columns (:attr:`GuardedAdminMixin.engine_fields`)
  without ``view_engine``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ERROR_FLAG
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _g

from .permissions import engine_permission, payload_permission, view_permission
from .scale import AdminMixinBase


def malformed(object_id: str, model: type[models.Model]) -> bool:
    """Whether no row of ``model`` can have this (unquoted) primary key."""
    if "\x00" in object_id:
        return True
    max_length = getattr(model._meta.pk, "max_length", None)
    return max_length is not None and len(object_id) > max_length


def clean_object_id(object_id: str, model: type[models.Model]) -> str:
    """The unquoted id from a URL, or 404 when no row can have it."""
    pk = unquote(object_id)
    if malformed(pk, model):
        raise Http404(_g("No %(name)s with that id.") % {"name": model._meta.verbose_name})
    return pk


def filter_lookups(model_admin: Any, request: HttpRequest) -> set[str]:
    """The query-string parameters the changelist's own filters use."""
    opts = model_admin.model._meta
    allowed: set[str] = set()
    for spec in model_admin.get_list_filter(request):
        if isinstance(spec, type) and issubclass(spec, admin.SimpleListFilter):
            allowed.add(str(spec.parameter_name))
            continue
        name, filter_class = spec if isinstance(spec, (tuple, list)) else (spec, None)
        if filter_class is not None and issubclass(filter_class, admin.EmptyFieldListFilter):
            allowed.add(f"{name}__isempty")
            continue
        try:
            field = opts.get_field(name)
        except FieldDoesNotExist:
            continue
        if field.is_relation:
            allowed.add(f"{name}__{field.target_field.name}__exact")
        elif isinstance(field, (models.DateField, models.DateTimeField)):
            allowed.update({f"{name}__gte", f"{name}__lt"})
        elif field.choices or isinstance(field, models.BooleanField):
            allowed.update({name, f"{name}__exact"})  # ?kind=celery as typed, or as linked
        else:
            allowed.add(name)
        allowed.add(f"{name}__isnull")
    return allowed


class GuardedAdminMixin(AdminMixinBase):
    """Least privilege for a weft ModelAdmin (see the module's docstring)."""

    #: Documented query-string lookups besides the list filters' (e.g. links from
    #: the overview).
    extra_lookups: tuple[str, ...] = ()
    #: Fields that hold the application's data: shown with the payload permission.
    payload_fields: tuple[str, ...] = ()
    #: Fields and list columns that name engines (hosts, pids): shown with ``view_engine``.
    engine_fields: tuple[str, ...] = ()

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return view_permission(request, self.model)

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        return lookup in filter_lookups(self, request) or lookup in self.extra_lookups

    def hidden_fields(self, request: HttpRequest) -> set[str]:
        hidden: set[str] = set()
        if not payload_permission(request):
            hidden.update(self.payload_fields)
        if not engine_permission(request):
            hidden.update(self.engine_fields)
        return hidden

    def get_list_display(self, request: HttpRequest) -> Any:
        hidden = self.hidden_fields(request)
        return [c for c in super().get_list_display(request) if c not in hidden]

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*(super().get_exclude(request, obj) or ()), *sorted(self.hidden_fields(request))]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        hidden = self.hidden_fields(request)
        return [f for f in super().get_readonly_fields(request, obj) if f not in hidden]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        hidden = self.hidden_fields(request)
        return [f for f in super().get_fields(request, obj) if f not in hidden]

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        if "\x00" in object_id or (from_field is None and malformed(object_id, self.model)):
            return None
        return super().get_object(request, object_id, from_field)

    def guard_object_view(self, request: HttpRequest, object_id: str) -> str:
        """403 without the view permission (whether or not the row exists), then
        404 for an id no row can have; the unquoted id."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return clean_object_id(object_id, self.model)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        self.guard_object_view(request, object_id)
        return super().change_view(request, object_id, form_url, extra_context)

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self.guard_object_view(request, object_id)
        return super().history_view(request, object_id, extra_context)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        if any("\x00" in "".join([key, *values]) for key, values in request.GET.lists()):
            # Django's answer to a filter it cannot apply: the "invalid filter" page.
            return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")
        return super().changelist_view(request, extra_context)
