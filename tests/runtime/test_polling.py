"""The caller-side wait (``weft.result``, ``weft.update``): backoff and bad timeouts."""

from __future__ import annotations

import math
import time

import pytest

import weft_django as weft
from weft_django.runtime.polling import NOT_YET, Backoff, Poll, check_timeout


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_timeout_that_is_not_finite_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        check_timeout(value)


@pytest.mark.parametrize("value", ["30", True, [1]])
def test_a_timeout_that_is_not_a_number_is_refused(value: object) -> None:
    with pytest.raises(TypeError, match="number of seconds"):
        check_timeout(value)  # type: ignore[arg-type]


def test_none_and_numbers_are_timeouts() -> None:
    assert check_timeout(None) is None
    assert check_timeout(2) == 2.0


def test_the_backoff_grows_and_is_capped_finely_at_first() -> None:
    backoff = Backoff(first=0.002, growth=2.0, cap=0.1, fine_cap=0.01, fine_for=1.0)
    assert backoff.next(0.002, elapsed=0.0) == 0.004
    assert backoff.next(0.008, elapsed=0.5) == 0.01
    assert backoff.next(0.01, elapsed=2.0) == 0.02
    assert backoff.next(0.08, elapsed=2.0) == 0.1


def test_poll_returns_the_first_answer_including_none() -> None:
    answers = iter([NOT_YET, NOT_YET, None])
    poll = Poll(lambda: next(answers), timeout=5, backoff=Backoff(0.001, 1.0, 0.001))
    assert poll.wait(lambda: AssertionError("timed out")) is None


def test_poll_raises_what_on_timeout_makes() -> None:
    poll = Poll(lambda: NOT_YET, timeout=0.05, backoff=Backoff(0.01, 1.0, 0.01))
    began = time.monotonic()
    with pytest.raises(TimeoutError, match="still waiting"):
        poll.wait(lambda: TimeoutError("still waiting"))
    assert 0.04 <= time.monotonic() - began < 1.0


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_result_and_update_refuse_a_timeout_that_would_never_end(
    driver: object, value: float
) -> None:
    handle = weft.start("tests.collect_signals", "x", 1, workflow_id="never")
    with pytest.raises(ValueError, match="finite"):
        handle.result(timeout=value)
    with pytest.raises(ValueError, match="finite"):
        weft.update("never", "anything", timeout=value)
    assert not handle.describe().pending_updates  # nothing was stored
