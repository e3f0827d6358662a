"""What keeps the admin fast at a million runs: capped counts, static filter
choices, and exact searches that hit an index.

* :class:`CappedPaginator` counts at most ``cap`` rows (``SELECT COUNT(*) FROM
  (SELECT ... ORDER BY <the list's order> LIMIT cap + 1)``), so a changelist
  never counts the whole table.
* :func:`index_order_plans` makes PostgreSQL walk an index in the list's order
  and stop at the ``LIMIT``, whatever its statistics say (right after a bulk
  load, with no ``ANALYZE``, it estimates an equality filter at 0.5 % of the
  rows and would otherwise collect every match in a bitmap and sort them).
* :func:`capped_count` is the same for one queryset.
* :class:`StaticChoicesFilter` offers a fixed list of values instead of Django's
  ``SELECT DISTINCT`` over the column on every page load.
* :class:`ExactSearchMixin` replaces Django's ``icontains`` / ``iexact`` search
  (which cannot use a B-tree index) with case-sensitive exact matches on indexed
  columns, OR-ed together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connections, models, transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _

from ..models import db_for

if TYPE_CHECKING:  # the mixins below are ModelAdmin mixins: type-check them as such
    AdminMixinBase = admin.ModelAdmin[Any]
else:
    AdminMixinBase = object

#: The most rows a changelist counts: past it, the page says "10,000+".
CHANGELIST_COUNT_CAP = 10_000


def capped_count(queryset: models.QuerySet, cap: int, *, ordered: bool = True) -> int:
    """``min(count, cap + 1)``: ``cap + 1`` means "more than ``cap``".

    ``ordered`` keeps the queryset's order in the subquery: ordered like an
    index, the database walks it and stops at the ``LIMIT``. An exact search
    (a few rows found through OR-ed indexes) counts unordered.
    """
    if not ordered:
        queryset = queryset.order_by()
    return queryset.values("pk")[: cap + 1].count()


@contextmanager
def index_order_plans(using: str | None = None, *, bitmaps: bool = False) -> Iterator[None]:
    """On PostgreSQL, a read-only transaction with bitmap scans off (unless
    ``bitmaps``: an exact search ORs indexes together), no parallel workers and
    no JIT (starting workers, or compiling a plan whose cost the planner
    overestimates, costs far more than reading a page of rows), all ``SET
    LOCAL``: this transaction only. Elsewhere nothing.

    Every admin list is ``ORDER BY <indexed columns> LIMIT n``: the plan that
    walks the index and stops after ``n`` rows is the right one at any size.
    Without statistics the planner guesses few matches and prefers a bitmap
    of all of them plus a sort, which at a million rows takes seconds.
    """
    alias = db_for(using)
    connection = connections[alias]
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic(using=alias):
        with connection.cursor() as cursor:
            # set_config(..., true) is SET LOCAL; one statement for all three.
            cursor.execute(
                "SELECT set_config('max_parallel_workers_per_gather', '0', true), "
                "set_config('jit', 'off', true), "
                "set_config('enable_bitmapscan', %s, true)",
                ["on" if bitmaps else "off"],
            )
        yield


def render_with_index_order(
    request: HttpRequest, view: Callable[[], HttpResponse], *, bitmaps: bool = False
) -> HttpResponse:
    """Run a read-only (GET) admin view and render its template response under
    :func:`index_order_plans` (the lists are evaluated while rendering)."""
    if request.method not in ("GET", "HEAD"):
        return view()
    with index_order_plans(bitmaps=bitmaps):
        response = view()
        render = getattr(response, "render", None)
        if render is not None and not getattr(response, "is_rendered", True):
            render()
    return response


class CappedPaginator(Paginator):
    """A paginator that counts only as far as it shows.

    ``probe`` rows at most are counted (``COUNT(*)`` over ``LIMIT probe + 1``,
    in the list's order): the changelist asks for the current page plus a few
    more, never past :data:`CHANGELIST_COUNT_CAP`, so a count costs about what
    the page itself costs. ``capped`` says whether more rows exist; the list
    then says "N+".
    """

    cap = CHANGELIST_COUNT_CAP

    def __init__(
        self, *args: Any, probe: int | None = None, ordered: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.probe = min(probe or self.cap, self.cap)
        self.ordered = ordered

    @cached_property
    def _capped_count(self) -> int:
        # The admin paginates querysets only (ChangeList.result_list, the engine and run pages).
        return capped_count(self.object_list, self.probe, ordered=self.ordered)  # type: ignore[arg-type]

    @cached_property
    def count(self) -> int:
        return min(self._capped_count, self.probe)

    @property
    def capped(self) -> bool:
        return self._capped_count > self.probe


#: Pages past the current one that a changelist's count looks ahead.
PAGES_AHEAD = 4


class CappedCountMixin(AdminMixinBase):
    """For ModelAdmins: capped page counts, no full ``COUNT(*)`` for the total,
    and index-ordered plans for the list."""

    paginator = CappedPaginator
    show_full_result_count = False

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: models.QuerySet,
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> Paginator:
        try:
            page = max(int(request.GET.get("p", 1)), 1)
        except ValueError:
            page = 1
        probe = (page + PAGES_AHEAD) * per_page
        searching = bool(request.GET.get("q"))
        return self.paginator(
            queryset, per_page, orphans, allow_empty_first_page, probe=probe, ordered=not searching
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        parent = super().changelist_view
        searching = bool(request.GET.get("q"))  # exact searches OR indexes: bitmaps wanted
        return render_with_index_order(
            request, lambda: parent(request, extra_context), bitmaps=searching
        )


class StaticChoicesFilter(admin.SimpleListFilter):
    """Filter ``field`` on a fixed list of values (no ``SELECT DISTINCT``)."""

    field = ""
    static_choices: Callable[[], Iterable[tuple[str, Any]]] | tuple[tuple[str, Any], ...] = ()

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        choices = self.static_choices
        return list(choices() if callable(choices) else choices)

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        value = self.value()
        if value:
            return queryset.filter(**{self.field: value})
        return queryset


class ExactSearchMixin(AdminMixinBase):
    """Search by exact, case-sensitive values of indexed columns.

    ``exact_search_fields`` name the columns (each must be the primary key, a
    unique column or carry an index); a term matches a row when one of them
    equals it exactly. Django's own ``search_fields`` only has to be non-empty
    for the search box to show.
    """

    exact_search_fields: tuple[str, ...] = ()
    search_help_text = _("Exact, case-sensitive match.")

    def get_search_results(
        self, request: HttpRequest, queryset: models.QuerySet, search_term: str
    ) -> tuple[models.QuerySet, bool]:
        term = search_term.strip()
        if not term or not self.exact_search_fields:
            return queryset, False
        condition = Q()
        for field in self.exact_search_fields:
            condition |= Q(**{field: term})
        return queryset.filter(condition), False
