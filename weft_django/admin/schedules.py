"""The admin of cron schedules (docs/schedules.md): each schedule with its next
and last firing, the run its last tick started (a link), and the actions pause,
resume and trigger now. Every action goes through
:mod:`weft_django.schedules.operations` (audited: a ``LogEntry`` for the
operator and a log line) and needs ``operate_workflowrun``, as operating runs
does. Rows are never added, edited or deleted here: schedules are declared in
code or settings."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from ..exceptions import WeftError
from ..models import Schedule, WorkflowRun
from ..schedules import operations
from ..schedules.declare import declared
from .display import admin_link
from .forms import ReasonForm, RunActionForm
from .options import ReadOnlyAdminMixin
from .permissions import operate_permission

#: The most schedules one action takes.
MAX_ACTION_SCHEDULES = 100


def _each(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet, operation: str) -> None:
    form = ReasonForm(request.POST)
    if not form.is_valid():
        modeladmin.message_user(
            request, _g("The reason is too long; nothing was changed."), messages.ERROR
        )
        return
    reason = form.cleaned_data["reason"]
    verb = getattr(operations, operation)
    done, failed = [], []
    names = queryset.order_by("name").values_list("name", flat=True)
    for name in names[:MAX_ACTION_SCHEDULES]:
        try:
            result = verb(name, reason=reason, by=request.user)
        except WeftError as exc:
            failed.append(f"{name}: {exc}")
            continue
        if result is not False:
            done.append(name)
    if done:
        modeladmin.message_user(
            request,
            _g("%(done)s: %(names)s")
            % {"done": operations.DONE[operation].capitalize(), "names": ", ".join(done)},
            messages.SUCCESS,
        )
    for failure in failed:
        modeladmin.message_user(request, failure, messages.ERROR)
    if not done and not failed:
        modeladmin.message_user(request, _g("Nothing to change."), messages.WARNING)


@admin.action(description=_("Pause selected schedules"), permissions=["operate"])
def pause_schedules(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _each(modeladmin, request, queryset, "pause")


@admin.action(description=_("Resume selected schedules"), permissions=["operate"])
def resume_schedules(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _each(modeladmin, request, queryset, "resume")


@admin.action(description=_("Trigger selected schedules now"), permissions=["operate"])
def trigger_schedules(modeladmin: Any, request: HttpRequest, queryset: models.QuerySet) -> None:
    _each(modeladmin, request, queryset, "trigger")


@admin.register(Schedule)
class ScheduleAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "name",
        "workflow_name",
        "cron",
        "timezone",
        "state",
        "next_tick",
        "last_tick",
        "last_run",
        "catch_up",
        "overlap",
    )
    list_filter = ("paused",)
    search_fields = ("=name", "=workflow_name")
    ordering = ("name",)
    action_form = RunActionForm
    actions = [pause_schedules, resume_schedules, trigger_schedules]
    readonly_fields = (
        "name",
        "workflow_name",
        "cron",
        "timezone",
        "catch_up",
        "overlap",
        "paused",
        "next_tick",
        "upcoming",
        "last_tick",
        "last_fired_at",
        "last_run",
        "queued_tick",
        "updated_at",
    )
    fields = readonly_fields

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return operate_permission(request)

    @admin.display(description=_("state"))
    def state(self, obj: Schedule) -> str:
        if obj.name not in _declared_names():
            return _g("not declared")
        return _g("paused") if obj.paused else _g("active")

    @admin.display(description=_("last run"))
    def last_run(self, obj: Schedule) -> str:
        if not obj.last_run_id:
            return "-"
        return admin_link(WorkflowRun, obj.last_run_id, obj.last_run_id)

    @admin.display(description=_("next firings"))
    def upcoming(self, obj: Schedule) -> str:
        spec = declared().get(obj.name)
        start = obj.next_tick
        if spec is None or start is None:
            return "-"
        ticks: list[datetime] = [start, *spec.parsed().upcoming(start, 4)]
        return ", ".join(f"{tick:%Y-%m-%d %H:%M:%S}Z" for tick in ticks)


def _declared_names() -> set[str]:
    try:
        return set(declared())
    except WeftError:
        return set()
