"""Hostile ids and names through the public API: every call either stores exactly
what it was given (read back equal) or raises ``InvalidIdError`` with nothing
stored, the same verdict on every database."""

from __future__ import annotations

import unicodedata

from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weft_django as weft
from weft_django import InvalidIdError
from weft_django.models import RunStatus, WorkflowRun, WorkflowSignal

LIMIT = 255
HOSTILE = ["\x00", "\u200b", "\ufeff", "\u2060", " ", "\t", "\ud800", "\udfff", "a", "é", "😀"]

ids = st.one_of(
    st.text(max_size=20),
    st.text(alphabet=st.characters(exclude_categories=()), max_size=20),  # surrogates too
    st.text(alphabet=st.sampled_from(HOSTILE), max_size=12),
    st.builds(
        lambda char, count: char * count,
        st.sampled_from(["x", "😀", "\u200b", "é"]),
        st.integers(LIMIT - 2, LIMIT + 3),
    ),
)


def storable(value: str) -> bool:
    """The rule, said independently of the code under test."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    visible = any(
        unicodedata.category(char) not in ("Zs", "Zl", "Zp", "Cc", "Cf") for char in value
    )
    return 0 < len(value) <= LIMIT and "\x00" not in value and visible


HYPOTHESIS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@HYPOTHESIS
@given(run_id=ids)
def test_start_describe_cancel_round_trip_or_refuse(db: None, run_id: str) -> None:
    with transaction.atomic():
        if storable(run_id):
            weft.start("tests.echo", workflow_id=run_id)
            assert list(WorkflowRun.objects.values_list("pk", flat=True)) == [run_id]
            assert weft.describe(run_id).workflow_id == run_id
            assert weft.get_handle(run_id).id == run_id
            weft.cancel(run_id)
            assert weft.describe(run_id).status == RunStatus.CANCELLED
        else:
            for call in (
                lambda: weft.start("tests.echo", workflow_id=run_id),
                lambda: weft.describe(run_id),
                lambda: weft.cancel(run_id),
                lambda: weft.signal(run_id, "go"),
            ):
                try:
                    call()
                except InvalidIdError as exc:
                    assert exc.what == "workflow_id"
                else:
                    raise AssertionError(f"{run_id!r} was accepted")
            assert not WorkflowRun.objects.exists()
        transaction.set_rollback(True)


@HYPOTHESIS
@given(name=ids, signal_id=ids)
def test_signal_names_and_ids_round_trip_or_refuse(db: None, name: str, signal_id: str) -> None:
    with transaction.atomic():
        weft.start("tests.collect_signals", "go", 1, workflow_id="h1")
        if storable(name) and storable(signal_id):
            weft.signal("h1", name, {"n": 1}, signal_id=signal_id)
            weft.signal("h1", name, {"n": 2}, signal_id=signal_id)  # a repeat: a no-op
            stored = list(WorkflowSignal.objects.values_list("name", "signal_id", "payload"))
            assert stored == [(name, signal_id, {"n": 1})]
        else:
            try:
                weft.signal("h1", name, signal_id=signal_id)
            except InvalidIdError as exc:
                assert exc.what == ("signal name" if not storable(name) else "signal_id")
            else:
                raise AssertionError(f"{name!r} / {signal_id!r} was accepted")
            assert not WorkflowSignal.objects.exists()
        transaction.set_rollback(True)
