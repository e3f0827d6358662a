"""weft_django: durable workflows for Django with fenced per-workflow ownership.

``import weft_django as weft`` gives the whole public API (README.md):
``__all__``, grouped by use, and ``dir(weft_django)`` list it. The verbs that
touch the database are loaded on first use, so importing the package (as
Django does while loading apps) never imports models.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .exceptions import (
    EngineDeposedError,
    FlowControlError,
    HandlerError,
    InvalidIdError,
    MetricsServerError,
    NonDeterminismError,
    OwnershipModeMismatchError,
    PayloadError,
    QueryError,
    RetryAfter,
    ScheduleNotFoundError,
    StartManyError,
    StepFailedError,
    StoreBusyError,
    UpdateRejectedError,
    UpdateTimeoutError,
    WaitTimeoutError,
    WeftConfigurationError,
    WeftError,
    WeftSecondEngineWarning,
    WeftWorkflowClaimLostWarning,
    WeftWorkflowWakeDiscardedWarning,
    WorkflowAlreadyExistsError,
    WorkflowArgumentsError,
    WorkflowBusyError,
    WorkflowCancelledError,
    WorkflowClaimUnavailableError,
    WorkflowFailedError,
    WorkflowForkError,
    WorkflowNotFoundError,
    WorkflowNotRegisteredError,
    WorkflowNotSuspendedError,
    WorkflowTerminalError,
)
from .runtime.context import Context
from .runtime.handles import ChildHandle, Update
from .runtime.policy import RetryPolicy
from .runtime.registry import workflow
from .schedules.declare import schedule

if TYPE_CHECKING:
    from .api import (
        StartRequest,
        WorkflowDescription,
        WorkflowHandle,
        cancel,
        describe,
        fork,
        get_handle,
        pause_schedule,
        purge,
        query,
        result,
        resume,
        resume_schedule,
        retry,
        signal,
        start,
        start_many,
        suspend,
        trigger_schedule,
        update,
    )

# The verbs and what they return, loaded from weft_django.api on first use.
_API = frozenset(
    {
        "StartRequest",
        "WorkflowDescription",
        "WorkflowHandle",
        "cancel",
        "describe",
        "fork",
        "get_handle",
        "pause_schedule",
        "purge",
        "query",
        "result",
        "resume",
        "resume_schedule",
        "retry",
        "signal",
        "start",
        "start_many",
        "suspend",
        "trigger_schedule",
        "update",
    }
)


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'weft_django' has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.api"), name)


def __dir__() -> list[str]:
    """The public names (``__all__``), the lazily loaded verbs included."""
    return sorted(__all__)


__all__ = [  # noqa: RUF022 (grouped by use, not sorted)
    # Defining workflows
    "ChildHandle",
    "Context",
    "RetryAfter",
    "RetryPolicy",
    "Update",
    "schedule",
    "workflow",
    # Starting and steering runs (any process)
    "StartRequest",
    "WorkflowDescription",
    "WorkflowHandle",
    "cancel",
    "describe",
    "fork",
    "get_handle",
    "purge",
    "query",
    "result",
    "resume",
    "retry",
    "signal",
    "start",
    "start_many",
    "suspend",
    "update",
    "pause_schedule",
    "resume_schedule",
    "trigger_schedule",
    # Errors
    "EngineDeposedError",
    "FlowControlError",
    "HandlerError",
    "MetricsServerError",
    "InvalidIdError",
    "NonDeterminismError",
    "OwnershipModeMismatchError",
    "PayloadError",
    "QueryError",
    "ScheduleNotFoundError",
    "StartManyError",
    "StepFailedError",
    "StoreBusyError",
    "UpdateRejectedError",
    "UpdateTimeoutError",
    "WaitTimeoutError",
    "WeftConfigurationError",
    "WeftError",
    "WorkflowAlreadyExistsError",
    "WorkflowArgumentsError",
    "WorkflowBusyError",
    "WorkflowCancelledError",
    "WorkflowClaimUnavailableError",
    "WorkflowFailedError",
    "WorkflowForkError",
    "WorkflowNotFoundError",
    "WorkflowNotRegisteredError",
    "WorkflowNotSuspendedError",
    "WorkflowTerminalError",
    # Warnings
    "WeftSecondEngineWarning",
    "WeftWorkflowClaimLostWarning",
    "WeftWorkflowWakeDiscardedWarning",
]
