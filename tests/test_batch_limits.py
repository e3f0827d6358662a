"""Batch sizes: each limit named once in ``weft_django.conf``, checked by one
function, and the default retention batch used by every way of pruning."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from weft_django import beat, conf
from weft_django.conf import (
    PASS_BATCH,
    PASS_MAX_BATCH,
    PRUNE_BATCH,
    PRUNE_MAX_BATCH,
    PassLimits,
    check_batch_size,
)
from weft_django.exceptions import WeftConfigurationError
from weft_django.retention import settings as retention_settings
from weft_django.retention.pruner import Pruner


@pytest.mark.parametrize("value", [1, 7, 10])
def test_a_batch_size_in_range_is_returned(value: int) -> None:
    assert check_batch_size(value, "n", maximum=10) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "n must be from 1 to 10, got 0."),
        (11, "n must be from 1 to 10, got 11."),
        (-3, "n must be from 1 to 10, got -3."),
        ("5", "n must be an integer, got '5'."),
        (2.0, "n must be an integer, got 2.0."),
        (True, "n must be an integer, got True."),
        (None, "n must be an integer, got None."),
    ],
)
def test_a_bad_batch_size_is_a_typed_error_naming_it(value: Any, message: str) -> None:
    with pytest.raises(WeftConfigurationError) as raised:
        check_batch_size(value, "n", maximum=10)
    assert str(raised.value) == message


def message(value: Any, what: str, maximum: int) -> str:
    with pytest.raises(WeftConfigurationError) as raised:
        check_batch_size(value, what, maximum=maximum)
    return str(raised.value)


@pytest.mark.parametrize("value", [0, PRUNE_MAX_BATCH + 1, "5"])
def test_every_retention_batch_is_checked_by_the_one_function(value: Any) -> None:
    with pytest.raises(WeftConfigurationError) as pruner:
        Pruner(retention=retention_settings.policy({}), batch_size=value)
    assert str(pruner.value) == message(value, "batch_size", PRUNE_MAX_BATCH)
    with pytest.raises(WeftConfigurationError) as scheduled:
        beat.beat_schedule(prune_every=60, prune_batch_size=value)
    assert str(scheduled.value) == message(value, "prune_batch_size", PRUNE_MAX_BATCH)
    [problem] = retention_settings.problems({"BATCH_SIZE": value})
    key = "WEFT['RETENTION']['BATCH_SIZE']"
    assert (problem.id, problem.msg) == ("weft.E016", message(value, key, PRUNE_MAX_BATCH))


def test_the_largest_retention_batch_is_accepted_everywhere() -> None:
    Pruner(retention=retention_settings.policy({}), batch_size=PRUNE_MAX_BATCH)
    assert retention_settings.problems({"BATCH_SIZE": PRUNE_MAX_BATCH}) == []
    beat.beat_schedule(prune_every=60, prune_batch_size=PRUNE_MAX_BATCH)


@pytest.mark.parametrize("value", [0, PASS_MAX_BATCH + 1, 2.5])
def test_a_store_pass_batch_is_checked_by_the_one_function(value: Any) -> None:
    with pytest.raises(WeftConfigurationError) as raised:
        PassLimits.of(value)
    assert str(raised.value) == message(value, "batch_size", PASS_MAX_BATCH)
    assert PassLimits.of(PASS_MAX_BATCH).batch_size == PASS_MAX_BATCH


def test_the_default_retention_batch_has_one_home() -> None:
    from weft_django.management.commands.weft_prune import Command
    from weft_django.tasks import prune_pass

    assert retention_settings.DEFAULTS["BATCH_SIZE"] == PRUNE_BATCH
    assert retention_settings.RetentionPolicy().batch_size == PRUNE_BATCH
    assert retention_settings.policy({}).batch_size == PRUNE_BATCH
    default = inspect.signature(beat.beat_schedule).parameters["prune_batch_size"].default
    assert default == PRUNE_BATCH
    assert inspect.signature(prune_pass.run).parameters["batch_size"].default == PRUNE_BATCH
    parser = Command().create_parser("manage.py", "weft_prune")
    assert f"BATCH_SIZE'], {PRUNE_BATCH})" in parser.format_help().replace("\n", " ")


def test_the_default_store_pass_batch_has_one_home() -> None:
    assert PassLimits().batch_size == PASS_BATCH
    assert PassLimits.of().batch_size == PASS_BATCH
    default = inspect.signature(beat.beat_schedule).parameters["batch_size"].default
    assert default == PASS_BATCH


def test_the_limits_are_distinct_rules() -> None:
    from weft_django.admin.actions import MAX_ACTION_RUNS

    assert not hasattr(retention_settings, "MAX_BATCH")
    assert not hasattr(PassLimits, "MAX_BATCH")
    assert not hasattr(conf, "MAX_BATCH")
    assert MAX_ACTION_RUNS == 500


def test_the_beat_schedule_documents_the_defaults() -> None:
    doc = " ".join((beat.beat_schedule.__doc__ or "").split())
    assert PASS_BATCH == PRUNE_BATCH  # the docstring gives one number for both
    assert f"default to {PRUNE_BATCH} runs" in doc
