"""``weft.result()`` inside ``transaction.atomic()``: a finished run's outcome is
returned (or raised) at once; waiting for an unfinished one is refused at once
with ``TransactionManagementError``, as ``weft.update()`` refuses, instead of
waiting out the whole timeout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError

import weft_django as weft
from weft_django import WorkflowCancelledError, WorkflowFailedError
from weft_django.models import WorkflowRun
from weft_django.testing import WorkflowDriver


@pytest.fixture
def committed_driver(transactional_db: None) -> Iterator[WorkflowDriver]:
    """A driver on a database whose writes commit (no test-wide transaction)."""
    with WorkflowDriver() as running:
        yield running


def test_waiting_for_an_unfinished_run_is_refused_at_once(
    committed_driver: WorkflowDriver,
) -> None:
    weft.start("tests.collect_signals", "x", 1, workflow_id="rt1")
    committed_driver.run_until_idle()  # parks, waiting for "x"
    # The wait would only time out (TimeoutError after 5 s): it is refused instead.
    # (timeout=None takes the same path; a test of it would hang on a regression.)
    with (
        pytest.raises(TransactionManagementError, match="non_atomic_requests") as caught,
        transaction.atomic(),
    ):
        weft.result("rt1", timeout=5)
    assert "'rt1' (still waiting)" in str(caught.value)
    with pytest.raises(TransactionManagementError), transaction.atomic():
        weft.get_handle("rt1").result(timeout=5)


def test_a_finished_run_is_answered_inside_a_transaction(
    committed_driver: WorkflowDriver,
) -> None:
    weft.start("tests.steps", 2, workflow_id="rt2")
    weft.start("tests.fails", workflow_id="rt3")
    weft.start("tests.collect_signals", "x", 1, workflow_id="rt4")
    committed_driver.run_until_idle()
    weft.cancel("rt4")
    with transaction.atomic():
        assert weft.result("rt2", timeout=None) == ["s0", "s1"]
        assert weft.get_handle("rt2").result(timeout=30) == ["s0", "s1"]
        with pytest.raises(WorkflowFailedError):
            weft.result("rt3", timeout=None)
        with pytest.raises(WorkflowCancelledError):
            weft.result("rt4", timeout=None)


def test_timeout_zero_looks_once_inside_a_transaction(
    committed_driver: WorkflowDriver,
) -> None:
    weft.start("tests.collect_signals", "x", 1, workflow_id="rt5")
    committed_driver.run_until_idle()
    with transaction.atomic(), pytest.raises(TimeoutError, match="still waiting"):
        weft.result("rt5", timeout=0)


def test_a_run_started_in_the_same_transaction_is_refused_not_waited_for(
    transactional_db: None,
) -> None:
    """The case that could never end: no worker sees the run before the commit."""
    with pytest.raises(TransactionManagementError), transaction.atomic():
        weft.start("tests.steps", 1, workflow_id="rt6")
        weft.result("rt6", timeout=5)
    assert not WorkflowRun.objects.filter(pk="rt6").exists()  # rolled back with it
