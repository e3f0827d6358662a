"""The read-only admin of the Celery pass summaries (``PassSummary``: one row per
pass kind, written only by the passes themselves; docs/celery.md)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from ..models import PassSummary
from .options import ReadOnlyAdminMixin
from .overview import as_json


@admin.register(PassSummary)
class PassSummaryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("kind", "finished_at", "succeeded", "counts", "hostname", "pid", "passes")
    ordering = ("kind",)
    fields = (
        "kind",
        "started_at",
        "finished_at",
        "succeeded",
        "counts_json",
        "error",
        "failures_json",
        "last_error",
        "last_error_at",
        "hostname",
        "pid",
        "engine_id",
        "passes",
    )
    readonly_fields = fields
    engine_fields = ("hostname", "pid", "engine_id")
    payload_fields = ("failures_json",)

    @admin.display(description=_("counts"))
    def counts_json(self, obj: PassSummary) -> SafeString:
        return format_html('<pre class="weft-json">{}</pre>', as_json(obj.counts))

    @admin.display(description=_("failures"))
    def failures_json(self, obj: PassSummary) -> SafeString:
        return format_html('<pre class="weft-json">{}</pre>', as_json(obj.failures))
