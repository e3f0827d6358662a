"""weft_django: durable workflows for Django with fenced per-workflow ownership."""

from __future__ import annotations

from .exceptions import (
    EngineDeposedError,
    NonDeterminismError,
    OwnershipModeMismatchError,
    PayloadError,
    UpdateRejectedError,
    UpdateTimeoutError,
    WaitTimeoutError,
    WeftError,
    WeftWorkflowClaimLostWarning,
    WeftWorkflowWakeDiscardedWarning,
    WorkflowAlreadyExistsError,
    WorkflowCancelledError,
    WorkflowClaimUnavailableError,
    WorkflowFailedError,
    WorkflowNotFoundError,
    WorkflowNotRegisteredError,
    WorkflowTerminalError,
)

__all__ = [
    "EngineDeposedError",
    "NonDeterminismError",
    "OwnershipModeMismatchError",
    "PayloadError",
    "UpdateRejectedError",
    "UpdateTimeoutError",
    "WaitTimeoutError",
    "WeftError",
    "WeftWorkflowClaimLostWarning",
    "WeftWorkflowWakeDiscardedWarning",
    "WorkflowAlreadyExistsError",
    "WorkflowCancelledError",
    "WorkflowClaimUnavailableError",
    "WorkflowFailedError",
    "WorkflowNotFoundError",
    "WorkflowNotRegisteredError",
    "WorkflowTerminalError",
]
