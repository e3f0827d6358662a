"""Hostile payloads through the public API: every ``weft.start`` and
``weft.signal`` either stores a value that reads back equal, or raises
PayloadError with nothing stored (never RecursionError, never a database error)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weft_django as weft
from weft_django.models import WorkflowRun, WorkflowSignal

pytestmark = pytest.mark.django_db

# NUL, lone surrogates, non-ASCII, brackets and quotes that look like nesting.
text = st.text(
    alphabet=st.sampled_from(["a", "\x00", "\ud800", "\udc00", "\u00e9", "\U0001f600", "[", '"']),
    max_size=8,
)
# PostgreSQL's jsonb keeps a float as a decimal number: a large one (1e300) comes
# back an int that is not the float's exact value, and -0.0 comes back 0.0 (equal
# by ==). Known, not a depth matter: finite floats stay below 2**50 here.
floats = st.sampled_from([math.nan, math.inf, -math.inf]) | st.floats(-(2.0**50), 2.0**50)
scalars = st.none() | st.booleans() | st.integers(-(10**60), 10**60) | floats | text


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


payloads = st.builds(
    nested, st.integers(0, 60), st.lists(scalars, max_size=3) | st.dictionaries(text, scalars)
)

HYPOTHESIS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@weft.workflow(name="tests.hostile.waits")
def waits(ctx: weft.Context, *args: Any) -> Any:
    return ctx.wait_for_signal("go")


@HYPOTHESIS
@given(payload=payloads)
def test_start_stores_the_arguments_exactly_or_refuses_them(payload: Any) -> None:
    WorkflowRun.objects.all().delete()
    try:
        weft.start("tests.hostile.waits", payload, workflow_id="hostile")
    except weft.PayloadError:
        assert not WorkflowRun.objects.exists()
        return
    assert WorkflowRun.objects.get(pk="hostile").args == [payload]


@HYPOTHESIS
@given(payload=payloads)
def test_signal_stores_the_payload_exactly_or_refuses_it(payload: Any) -> None:
    WorkflowRun.objects.all().delete()
    weft.start("tests.hostile.waits", workflow_id="hostile")
    try:
        weft.signal("hostile", "go", payload)
    except weft.PayloadError:
        assert not WorkflowSignal.objects.exists()
        return
    stored = WorkflowSignal.objects.get(run_id="hostile").payload
    assert stored == payload


@pytest.mark.parametrize(
    "payload",
    [{"\ud800\udc00": None}, ["\ud800\udc00"], ["a\ud83d\ude00b"]],
    ids=["pair-as-key", "pair-as-value", "pair-inside"],
)
def test_two_surrogate_code_points_are_refused_not_read_back_as_one(payload: Any) -> None:
    """JSON escapes U+10000 and the two code points U+D800 U+DC00 alike, and reads
    both back as the one character: the second is not text, so it is refused."""
    with pytest.raises(weft.PayloadError):
        weft.start("tests.hostile.waits", payload, workflow_id="pair")
    assert not WorkflowRun.objects.filter(pk="pair").exists()
    weft.start("tests.hostile.waits", {"\U00010000": "\U0001f600"}, workflow_id="astral")
    assert WorkflowRun.objects.get(pk="astral").args == [{"\U00010000": "\U0001f600"}]
