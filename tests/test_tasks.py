"""The Celery tasks in-process, through Celery's eager path (``task_always_eager``):
their names, arguments, summaries and log line (docs/celery.md)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import Celery

import weft_django as weft
from example_project import celery_app
from tests.runtime import workflows  # noqa: F401 (registers tests.*)
from tests.updates import workflows as update_workflows  # noqa: F401 (registers tests.updates.*)
from tests.updates.conftest import answer, expire_lease, send
from weft_django.exceptions import WeftConfigurationError
from weft_django.models import Engine, EngineKind, EngineStatus
from weft_django.tasks import describe, signal_poll_pass, update_poll_pass

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager() -> Iterator[Celery]:
    assert celery_app is not None
    conf = celery_app.conf
    saved = (conf.task_always_eager, conf.task_eager_propagates)
    conf.task_always_eager, conf.task_eager_propagates = True, True
    yield celery_app
    conf.task_always_eager, conf.task_eager_propagates = saved


def test_the_tasks_have_their_fixed_names_and_are_autodiscovered() -> None:
    assert celery_app is not None
    celery_app.loader.import_default_modules()
    assert signal_poll_pass.name == "weft_django.signal_poll_pass"
    assert update_poll_pass.name == "weft_django.update_poll_pass"
    assert {signal_poll_pass.name, update_poll_pass.name} <= set(celery_app.tasks)
    assert celery_app.conf.accept_content == ["json"]


def test_eager_signal_pass_returns_its_json_summary_and_logs_one_line(
    eager: Celery, make_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    owner = make_engine()
    weft.start("tests.steps_around_signal", workflow_id="eager-1")
    owner.claim_and_drive("eager-1")
    expire_lease(owner)
    weft.signal("eager-1", "go")

    with caplog.at_level(logging.INFO, logger="weft_django.tasks"):
        summary = signal_poll_pass.delay(batch_size=10, time_budget=5).get()

    assert json.loads(json.dumps(summary)) == summary
    assert summary["counts"] == {"drained": 1}
    assert set(summary) >= {"pass", "engine_id", "started_at", "finished_at", "counts", "failures"}
    engine = Engine.objects.get(id=summary["engine_id"])
    assert (engine.kind, engine.status) == (EngineKind.CELERY, EngineStatus.STOPPED)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "weft_django.tasks"]
    assert line == describe(summary)
    assert line.startswith(f"signal_poll_pass engine={engine.id} ") and "drained=1" in line


def test_eager_update_pass_answers_the_caller(eager: Celery, make_engine: Any) -> None:
    owner = make_engine()
    weft.start("tests.updates.counter", workflow_id="eager-2")
    owner.claim_and_drive("eager-2")
    expire_lease(owner)
    update_id = send("eager-2", "add", 3)

    summary = update_poll_pass.delay().get()

    assert summary["counts"] == {"drained": 1}
    assert answer("eager-2", update_id)["total"] == 3


def test_an_idle_pass_logs_that_it_had_nothing_to_do(eager: Celery) -> None:
    summary = update_poll_pass.delay(time_budget=timedelta(seconds=1).total_seconds()).get()
    assert summary["counts"] == {} and summary["failures"] == []
    assert describe(summary).endswith("nothing to do")


@pytest.mark.parametrize(
    "kwargs",
    [{"batch_size": 0}, {"batch_size": "many"}, {"time_budget": 0}, {"time_budget": None}],
)
def test_bad_arguments_raise_and_write_nothing(eager: Celery, kwargs: dict[str, Any]) -> None:
    with pytest.raises(WeftConfigurationError):
        signal_poll_pass.delay(**kwargs).get()
    assert not Engine.objects.exists()


def test_describe_lists_the_failures() -> None:
    line = describe(
        {
            "pass": "signal_poll_pass",
            "engine_id": "e1",
            "seconds": 0.5,
            "counts": {"drained": 2, "drain_failed": 1},
            "failures": [{"run_id": "r9", "error_type": "DrainError", "message": "..."}],
        }
    )
    assert (
        line
        == "signal_poll_pass engine=e1 0.500s drain_failed=1 drained=2 failures=[r9:DrainError]"
    )


def test_without_the_extra_the_module_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "celery", None)  # as if celery were not installed
    monkeypatch.delitem(sys.modules, "weft_django.tasks")
    with pytest.raises(WeftConfigurationError, match=r"weft-django\[celery\]"):
        importlib.import_module("weft_django.tasks")
    import weft_django as package

    assert package.signal is not None  # the rest of weft works without Celery


def test_the_admin_shows_a_celery_engine_with_its_last_summary(
    eager: Celery, admin_client: Any
) -> None:
    from django.contrib.admin.utils import quote
    from django.urls import reverse

    summary = signal_poll_pass.delay().get()
    listing = admin_client.get(reverse("admin:weft_django_engine_changelist") + "?kind=celery")
    assert summary["engine_id"] in listing.content.decode()
    page = admin_client.get(
        reverse("admin:weft_django_engine_change", args=[quote(summary["engine_id"])])
    )
    assert page.status_code == 200
    assert "signal_poll_pass" in page.content.decode()
