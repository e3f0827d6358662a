"""The error and warning classes of the README: names, bases and fields."""

from __future__ import annotations

import logging
import warnings
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ImproperlyConfigured

import weft_django
from weft_django.exceptions import (
    OwnershipMarkerCorruptError,
    OwnershipMarkerDeletedError,
    WeftConfigurationError,
    warn,
)

PUBLIC_ERRORS = [
    "WeftConfigurationError",
    "WorkflowArgumentsError",
    "WorkflowNotRegisteredError",
    "WorkflowAlreadyExistsError",
    "WorkflowNotFoundError",
    "WorkflowTerminalError",
    "WorkflowFailedError",
    "WorkflowCancelledError",
    "WaitTimeoutError",
    "UpdateTimeoutError",
    "UpdateRejectedError",
    "NonDeterminismError",
    "PayloadError",
    "InvalidIdError",
    "WorkflowClaimUnavailableError",
    "EngineDeposedError",
    "OwnershipModeMismatchError",
]
PUBLIC_WARNINGS = [
    "WeftSecondEngineWarning",
    "WeftWorkflowClaimLostWarning",
    "WeftWorkflowWakeDiscardedWarning",
]


@pytest.mark.parametrize("name", ["WeftError", *PUBLIC_ERRORS, *PUBLIC_WARNINGS])
def test_importable_from_the_top_level(name: str) -> None:
    assert hasattr(weft_django, name)
    assert name in weft_django.__all__


@pytest.mark.parametrize("name", PUBLIC_ERRORS)
def test_every_error_subclasses_weft_error(name: str) -> None:
    cls = getattr(weft_django, name)
    assert issubclass(cls, weft_django.WeftError)
    assert issubclass(cls, Exception)


def test_weft_error_is_an_exception() -> None:
    assert issubclass(weft_django.WeftError, Exception)
    assert not issubclass(weft_django.WeftError, Warning)


@pytest.mark.parametrize(
    "cls",
    [
        WeftConfigurationError,
        weft_django.OwnershipModeMismatchError,
        OwnershipMarkerCorruptError,
        OwnershipMarkerDeletedError,
    ],
)
def test_configuration_errors_are_improperly_configured(cls: type[Exception]) -> None:
    assert issubclass(cls, ImproperlyConfigured)
    assert issubclass(cls, weft_django.WeftError)


def test_workflow_terminal_error_fields() -> None:
    error = weft_django.WorkflowTerminalError("order-42", "completed")
    assert (error.workflow_id, error.status) == ("order-42", "completed")
    assert "order-42" in str(error) and "completed" in str(error)


def test_update_timeout_error_fields() -> None:
    error = weft_django.UpdateTimeoutError("upd-1")
    assert error.update_id == "upd-1"
    assert isinstance(error, TimeoutError)
    assert "upd-1" in str(error)


def test_update_rejected_error_fields() -> None:
    error = weft_django.UpdateRejectedError("upd-2", "quantity must be positive")
    assert (error.update_id, error.message) == ("upd-2", "quantity must be positive")
    assert "quantity must be positive" in str(error)


@pytest.mark.parametrize("held_by", ["engine-a", None])
def test_workflow_claim_unavailable_error_fields(held_by: str | None) -> None:
    error = weft_django.WorkflowClaimUnavailableError("order-42", held_by)
    assert (error.workflow_id, error.held_by) == ("order-42", held_by)
    assert "order-42" in str(error)


def test_engine_deposed_error_fields() -> None:
    error = weft_django.EngineDeposedError("order-42")
    assert error.workflow_id == "order-42"
    assert "order-42" in str(error)


def test_ownership_mode_mismatch_error_fields() -> None:
    established = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    error = weft_django.OwnershipModeMismatchError("lease", "workflow-lease", established)
    assert error.configured_mode == "lease"
    assert error.stored_mode == "workflow-lease"
    assert error.established_at == established
    assert isinstance(error, ImproperlyConfigured)
    text = str(error)
    assert "'lease'" in text and "'workflow-lease'" in text
    assert established.isoformat() in text
    assert "weft_marker --reset" in text  # the repair path


def test_wait_timeout_error_is_a_timeout_error() -> None:
    assert issubclass(weft_django.WaitTimeoutError, TimeoutError)
    with pytest.raises(TimeoutError):
        raise weft_django.WaitTimeoutError("signal 'decision' timed out")


def test_lookup_style_errors_carry_their_subject() -> None:
    assert weft_django.WorkflowNotRegisteredError("shop.x").name == "shop.x"
    assert weft_django.WorkflowAlreadyExistsError("order-1").workflow_id == "order-1"
    assert weft_django.WorkflowNotFoundError("order-2").workflow_id == "order-2"
    assert weft_django.WorkflowCancelledError("order-3").workflow_id == "order-3"
    failed = weft_django.WorkflowFailedError("order-4", {"type": "ValueError", "message": "no"})
    assert failed.workflow_id == "order-4"
    assert failed.error == {"type": "ValueError", "message": "no"}
    assert "ValueError: no" in str(failed)
    assert weft_django.WorkflowFailedError("order-5").error == {}


def test_workflow_arguments_error_is_a_type_error_with_the_binding_reason() -> None:
    error = weft_django.WorkflowArgumentsError("shop.ship", "too many positional arguments")
    assert isinstance(error, TypeError)
    assert (error.name, error.reason) == ("shop.ship", "too many positional arguments")
    assert str(error) == (
        "Workflow 'shop.ship' cannot take these arguments: too many positional arguments."
    )


def test_failed_and_timed_out_runs_are_told_apart() -> None:
    timed_out = weft_django.WorkflowFailedError(
        "o-7", {"type": "TimedOut", "message": "execution timeout reached"}, status="timed_out"
    )
    assert timed_out.status == "timed_out"
    assert str(timed_out) == "Workflow run 'o-7' timed out: its execution timeout passed."
    assert str(weft_django.WorkflowFailedError("o-8", {"type": "failed"})) == (
        "Workflow run 'o-8' failed."
    )
    assert str(weft_django.WorkflowFailedError("o-9", {"message": "gone"})) == (
        "Workflow run 'o-9' failed: gone"
    )


def test_update_rejected_error_says_whether_the_handler_failed() -> None:
    rejected = weft_django.UpdateRejectedError("u-1", "qty must be positive")
    assert (rejected.status, str(rejected)) == (
        "rejected",
        "Update 'u-1' was rejected: qty must be positive",
    )
    failed = weft_django.UpdateRejectedError("u-2", "KeyError: 'x'", status="failed")
    assert str(failed) == "Update 'u-2' failed in its handler: KeyError: 'x'"


def test_non_determinism_error_fields() -> None:
    error = weft_django.NonDeterminismError("order-6", 3, "step:a", "signal:b")
    assert (error.workflow_id, error.seq, error.expected, error.found) == (
        "order-6",
        3,
        "step:a",
        "signal:b",
    )
    assert "#3" in str(error)


def test_payload_error_is_a_value_error() -> None:
    error = weft_django.PayloadError("signal payload", "over 262144 bytes")
    assert isinstance(error, ValueError)
    assert (error.what, error.reason) == ("signal payload", "over 262144 bytes")


def test_claim_lost_warning_carries_workflow_id() -> None:
    warning = weft_django.WeftWorkflowClaimLostWarning("order-42")
    assert isinstance(warning, UserWarning)
    assert warning.workflow_id == "order-42"
    assert "order-42" in str(warning)


def test_wake_discarded_warning_carries_workflow_id_and_kind() -> None:
    warning = weft_django.WeftWorkflowWakeDiscardedWarning("order-42", "signal")
    assert isinstance(warning, UserWarning)
    assert (warning.workflow_id, warning.wake_kind) == ("order-42", "signal")
    assert "signal" in str(warning) and "order-42" in str(warning)


def test_warn_emits_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    warning = weft_django.WeftWorkflowClaimLostWarning("order-7")
    with (
        caplog.at_level(logging.WARNING, logger="weft_django"),
        pytest.warns(weft_django.WeftWorkflowClaimLostWarning) as record,
    ):
        warn(warning)
    assert record[0].message is warning
    assert "order-7" in caplog.text


def test_warn_never_raises_under_warnings_as_errors(caplog: pytest.LogCaptureFixture) -> None:
    """``filterwarnings = error`` (as in this project) must not stop an engine."""
    with caplog.at_level(logging.WARNING, logger="weft_django"), warnings.catch_warnings():
        warnings.simplefilter("error")
        warn(weft_django.WeftWorkflowWakeDiscardedWarning("order-8", "timer"))
    assert "order-8" in caplog.text


def test_invalid_id_error_is_a_value_error_naming_the_parameter() -> None:
    error = weft_django.InvalidIdError("signal_id", "a\x00" * 30, "must not hold a NUL", 255)
    assert isinstance(error, ValueError)
    assert (error.what, error.value, error.reason, error.limit) == (
        "signal_id",
        "a\x00" * 30,
        "must not hold a NUL",
        255,
    )
    text = str(error)
    assert text.startswith("signal_id must not hold a NUL; got 'a\\x00")
    assert "' (its first 40 of 60 characters). " in text
    assert "1 to 255 characters" in text
