"""Retention of engine rows: dead engines (lease expired, never stopped) and the
stopped engines of Celery passes go too, in bounded batches, unless a claim names them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import ClaimFactory, EngineFactory
from weft_django.models import Engine, EngineKind, EngineStatus
from weft_django.ownership.clock import db_now
from weft_django.retention.pruner import prune
from weft_django.retention.settings import policy

pytestmark = pytest.mark.django_db

DAY = 86400.0


def engine_ids() -> set[str]:
    return set(Engine.objects.values_list("id", flat=True))


def test_dead_engines_past_the_retention_go_unless_a_claim_names_them() -> None:
    now = db_now()
    EngineFactory(id="dead-old", lease_expires_at=now - timedelta(days=8))
    EngineFactory(
        id="disposing-old", status=EngineStatus.DISPOSING, lease_expires_at=now - timedelta(days=9)
    )
    EngineFactory(id="dead-recent", lease_expires_at=now - timedelta(days=2))
    held = EngineFactory(id="dead-holding", lease_expires_at=now - timedelta(days=8))
    ClaimFactory(workflow_id="still-held", holder=held)
    EngineFactory(id="live")
    summary = prune(retention=policy({"ENGINES": 7 * DAY}))
    assert engine_ids() == {"dead-recent", "dead-holding", "live"}
    assert summary.deleted["engines"] == 2 and summary.complete
    # None keeps dead engines forever, like stopped ones.
    EngineFactory(id="dead-older", lease_expires_at=now - timedelta(days=30))
    assert prune(retention=policy({"ENGINES": None})).deleted["engines"] == 0
    assert "dead-older" in engine_ids()


def test_stopped_celery_engines_go_after_their_own_shorter_retention() -> None:
    now = db_now()
    for n in range(7):
        EngineFactory(
            id=f"celery-{n}",
            kind=EngineKind.CELERY,
            stopped=True,
            stopped_at=now - timedelta(hours=2, minutes=n),
        )
    EngineFactory(id="celery-new", kind=EngineKind.CELERY, stopped=True, stopped_at=now)
    EngineFactory(id="worker-stopped", stopped=True, stopped_at=now - timedelta(hours=2))
    summary = prune(retention=policy({"CELERY_ENGINES": 3600}), batch_size=3)
    assert engine_ids() == {"celery-new", "worker-stopped"}
    assert summary.deleted["engines"] == 7
    # Bounded batches: 3 + 3 + 1 rows (and no batch over the runs, all empty).
    assert summary.batches == 3
    EngineFactory(
        id="celery-kept", kind=EngineKind.CELERY, stopped=True, stopped_at=now - timedelta(hours=2)
    )
    assert prune(retention=policy({"CELERY_ENGINES": None})).deleted["engines"] == 0


def test_engine_batches_cost_the_same_however_many_engines_go() -> None:
    def statements(count: int) -> int:
        now = db_now()
        for n in range(count):
            EngineFactory(id=f"d{count}-{n}", lease_expires_at=now - timedelta(days=8))
        with CaptureQueriesContext(connection) as queries:
            summary = prune(retention=policy(), batch_size=count, statuses=[])
        assert summary.deleted["engines"] == count
        return len(queries.captured_queries)

    assert statements(3) == statements(12)


def test_an_invalid_celery_engines_retention_is_a_configuration_problem() -> None:
    from weft_django.retention.settings import problems

    (problem,) = problems({"CELERY_ENGINES": -1})
    assert problem.id == "weft.E016" and "CELERY_ENGINES" in problem.msg
