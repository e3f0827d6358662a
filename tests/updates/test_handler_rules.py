"""Handlers run synchronously at delivery and on every replay: no ctx operations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import weft_django as weft
from weft_django.models import WorkflowEvent


@weft.workflow(name="tests.updates.rule_breaker")
def rule_breaker(ctx: weft.Context) -> str:
    @ctx.on_update("stamp")
    def stamp(payload: Any) -> str:
        return ctx.now().isoformat()  # not allowed

    @ctx.on_query("slow")
    def slow() -> Any:
        return ctx.step(lambda: 1)  # not allowed

    ctx.wait_for_signal("done")
    return "ok"


@pytest.mark.django_db
def test_ctx_operations_inside_handlers_are_refused_clearly(
    make_engine: Callable[..., Any],
) -> None:
    engine = make_engine()
    weft.start("tests.updates.rule_breaker", workflow_id="rb")
    engine.acquire("rb")
    engine.drive("rb")
    events = WorkflowEvent.objects.filter(run_id="rb").count()
    with pytest.raises(weft.UpdateTimeoutError) as caught:
        weft.update("rb", "stamp", None, timeout=0)
    engine.drive("rb")
    with pytest.raises(weft.UpdateRejectedError, match="must not call ctx operations"):
        weft.update("rb", "stamp", None, update_id=caught.value.update_id, timeout=0)
    with pytest.raises(weft.QueryError, match="must not call ctx operations"):
        weft.query("rb", "slow")
    # the failed update is recorded (replay re-raises it), no stray event before it
    kinds = list(WorkflowEvent.objects.filter(run_id="rb").order_by("seq").values_list("kind"))
    assert kinds[events:] == [("update",)]
    weft.signal("rb", "done")
    engine.drive("rb")
    assert weft.result("rb", timeout=0) == "ok"
