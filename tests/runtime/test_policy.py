"""RetryPolicy validates every field when it is made (issue 24): a ValueError that
names the field, the value and what is allowed, never a silent 1 or a TypeError
inside a run later. ``TASKS`` ``OPTIONS["RETRY"]`` goes through the same rules
(tests/checks/test_extras.py)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from weft_django import RetryPolicy
from weft_django.runtime.policy import RETRY_FIELDS


@pytest.mark.parametrize("value", [0, -1, -(10**20), "3", 3.0, 2.5, None, True, False, [3]])
def test_max_attempts_must_be_an_int_of_at_least_one(value: Any) -> None:
    with pytest.raises(ValueError, match=r"max_attempts must be an int of at least 1") as caught:
        RetryPolicy(max_attempts=value)
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize("field", ["initial_interval", "max_interval"])
@pytest.mark.parametrize(
    "value",
    [
        -1,
        -0.001,
        timedelta(seconds=-1),
        "1",
        None,
        True,
        [1],
        math.nan,
        math.inf,
        -math.inf,
        10**400,
    ],
    ids=lambda v: repr(v)[:24],
)
def test_intervals_must_be_finite_seconds_or_timedeltas_at_least_zero(
    field: str, value: Any
) -> None:
    with pytest.raises(ValueError, match=rf"^{field} must be seconds") as caught:
        RetryPolicy(**{field: value})
    assert "timedelta" in str(caught.value) and "at least 0" in str(caught.value)


@pytest.mark.parametrize(
    "value", [0, 0.5, -2, "2", None, True, math.nan, math.inf, 10**400], ids=lambda v: repr(v)[:12]
)
def test_backoff_must_be_a_finite_number_of_at_least_one(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^backoff must be a finite number of at least 1"):
        RetryPolicy(backoff=value)


@pytest.mark.parametrize(
    ("initial", "cap"), [(10, 5), (timedelta(seconds=2), 1.5), (1, timedelta(milliseconds=10))]
)
def test_max_interval_below_initial_interval_is_refused(initial: Any, cap: Any) -> None:
    with pytest.raises(ValueError, match=r"max_interval .* must be at least initial_interval"):
        RetryPolicy(initial_interval=initial, max_interval=cap)


@pytest.mark.parametrize(
    "value", ["ValueError", [ValueError, "KeyError"], (ValueError, 3), ValueError(), int, None]
)
def test_non_retryable_must_be_exception_classes(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^non_retryable must be an exception class"):
        RetryPolicy(non_retryable=value)


def test_non_retryable_takes_one_class_a_list_or_a_tuple() -> None:
    assert RetryPolicy(non_retryable=KeyError).non_retryable == (KeyError,)
    assert RetryPolicy(non_retryable=[KeyError, OSError]).non_retryable == (KeyError, OSError)
    assert RetryPolicy(non_retryable=(KeyError,)).non_retryable == (KeyError,)
    assert RetryPolicy().non_retryable == ()


def test_valid_policies() -> None:
    for policy in (
        RetryPolicy(),
        RetryPolicy(max_attempts=1),
        RetryPolicy(max_attempts=10**6, initial_interval=0, backoff=1, max_interval=0),
        RetryPolicy(initial_interval=timedelta(milliseconds=1), max_interval=timedelta(hours=1)),
        RetryPolicy(initial_interval=2, max_interval=2),
    ):
        assert policy.interval(1) >= 0


def test_a_long_run_of_attempts_stays_at_the_cap() -> None:
    """2.0 ** 1100 overflows a float: the wait is the cap, not an OverflowError."""
    policy = RetryPolicy(max_attempts=5000, initial_interval=1, backoff=2, max_interval=60)
    assert policy.interval(1100) == 60.0
    assert policy.interval(4999) == 60.0
    assert RetryPolicy(max_attempts=5000, initial_interval=0).interval(4000) == 0.0


def test_the_fields_are_listed_in_order() -> None:
    assert RETRY_FIELDS == (
        "max_attempts",
        "initial_interval",
        "backoff",
        "max_interval",
        "non_retryable",
    )
