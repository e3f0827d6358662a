"""What a long-lived host remembers of a pass over many runs: its counts and first
failures, not one entry per run (bench/parked_memory.py)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from weft_django.ownership.claims.results import Lost, RenewResult
from weft_django.ownership.passes.outcomes import Outcome, PassResult
from weft_django.runtime.passes.renewal import EnginePasses


def _now() -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC)


def _big(count: int) -> PassResult:
    result = PassResult("signal_poll", started_at=_now())
    for index in range(count):
        result.record(f"r{index}", Outcome.NOT_BUFFERED)
    for index in range(150):
        result.record(f"bad{index}", Outcome.WAKE_FAILED, RuntimeError(f"boom {index}"))
    return result.done()


def test_a_big_result_keeps_counts_and_the_first_failures_only():
    result = _big(5000)
    compact = result.compact()
    assert compact.outcomes == {}
    assert compact.counts == result.counts == {"not_buffered": 5000, "wake_failed": 150}
    assert compact.count(Outcome.WAKE_FAILED) == 150
    assert list(compact.errors) == [f"bad{index}" for index in range(100)]
    assert compact.summary("e") == result.summary("e")
    assert compact.seconds == result.seconds
    assert len(result.outcomes) == 5150  # the original is untouched


def test_a_small_result_is_kept_whole():
    result = PassResult("update_poll", started_at=_now())
    result.record("p1", Outcome.DRAINED)
    assert result.compact() is result


def test_engine_passes_remember_compact_results():
    passes = EnginePasses.__new__(EnginePasses)  # only its memory of results is used
    passes._last, passes._lock = {}, threading.Lock()
    passes.keep(_big(2000))
    kept = passes.last()["signal_poll"]
    assert kept.outcomes == {} and kept.counts["not_buffered"] == 2000


def test_renew_outcomes_mark_lost_claims_failed():
    renewal = RenewResult(started_at=_now(), held={"a": 1, "b": 2})
    renewal.lost.append(Lost("b", 2))
    assert renewal.outcomes == {"a": Outcome.RENEWED, "b": Outcome.FAILED}
