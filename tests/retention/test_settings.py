"""``WEFT["RETENTION"]``: parsing, defaults, and the system checks weft.E016/E017."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.core import checks

from weft_django.conf import get_settings
from weft_django.exceptions import WeftConfigurationError
from weft_django.retention.settings import DEFAULTS, policy, problems

DAY = 86400.0


def retention_errors() -> list[str]:
    found = checks.run_checks(tags=["weft"])
    return sorted(m.id for m in found if m.id in ("weft.E016", "weft.E017"))


def test_documented_defaults() -> None:
    assert {
        "COMPLETED": timedelta(days=7),
        "FAILED": timedelta(days=30),
        "CANCELLED": timedelta(days=30),
        "TIMED_OUT": timedelta(days=30),
        "ENGINES": timedelta(days=7),
        "CELERY_ENGINES": timedelta(hours=1),
        "WORKER_INTERVAL": None,
        "BATCH_SIZE": 500,
    } == DEFAULTS
    parsed = policy(None)
    assert parsed.statuses == {
        "completed": 7 * DAY,
        "failed": 30 * DAY,
        "cancelled": 30 * DAY,
        "timed_out": 30 * DAY,
    }
    assert parsed.engines == 7 * DAY
    assert parsed.celery_engines == 3600.0
    assert parsed.worker_interval is None
    assert parsed.batch_size == 500


def test_seconds_timedelta_and_none() -> None:
    parsed = policy(
        {"COMPLETED": 60, "FAILED": timedelta(hours=1), "CANCELLED": None, "ENGINES": 0}
    )
    assert parsed.statuses["completed"] == 60
    assert parsed.statuses["failed"] == 3600
    assert parsed.statuses["cancelled"] is None
    assert parsed.engines == 0
    assert parsed.pruned_statuses() == ["completed", "failed", "timed_out"]


def test_read_lazily_from_settings(settings: Any) -> None:
    settings.WEFT = {"RETENTION": {"COMPLETED": 5}}
    assert policy().statuses["completed"] == 5
    settings.WEFT = {"RETENTION": {"COMPLETED": 9}}
    assert policy().statuses["completed"] == 9


@pytest.mark.parametrize(
    "value",
    [-1, "7d", [1], math.nan, math.inf, True, timedelta(seconds=-1), 10**400, 1e300],
)
@pytest.mark.parametrize("key", ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT", "ENGINES"])
def test_bad_retention_is_e016(settings: Any, key: str, value: Any) -> None:
    settings.WEFT = {"RETENTION": {key: value}}
    assert retention_errors() == ["weft.E016"]
    with pytest.raises(WeftConfigurationError, match="E016"):
        policy()


@pytest.mark.parametrize(
    "extra",
    [
        {"WORKER_INTERVAL": 0},
        {"WORKER_INTERVAL": 0.5},
        {"WORKER_INTERVAL": "often"},
        {"BATCH_SIZE": 0},
        {"BATCH_SIZE": 10**6},
        {"BATCH_SIZE": 2.5},
        {"BATCH_SIZE": False},
    ],
)
def test_bad_worker_interval_or_batch_is_e016(settings: Any, extra: dict[str, Any]) -> None:
    settings.WEFT = {"RETENTION": extra}
    assert retention_errors() == ["weft.E016"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"RUNNING": 5}, "not a terminal status"),
        ({"PENDING": None}, "not a terminal status"),
        ({"COMPLETE": 5}, "not a retention setting"),
        ({3: 5}, "not a retention setting"),
        ([("COMPLETED", 5)], "must be a dict"),
        (timedelta(days=7), "must be a dict"),
    ],
)
def test_bad_key_or_shape_is_e017(settings: Any, value: Any, text: str) -> None:
    settings.WEFT = {"RETENTION": value}
    assert retention_errors() == ["weft.E017"]
    assert text in problems()[0].msg


def test_valid_retention_is_silent_and_does_not_bother_the_engine(settings: Any) -> None:
    settings.WEFT = {"RETENTION": {"COMPLETED": timedelta(days=1), "WORKER_INTERVAL": 60}}
    assert retention_errors() == []
    settings.WEFT = {"RETENTION": {"COMPLETED": -1}}
    get_settings()  # the engine's settings stay valid; the pruner refuses to run
