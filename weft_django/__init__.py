"""weft_django: durable workflows for Django with fenced per-workflow ownership.

``import weft_django as weft`` gives the public API of DESIGN.md §2. The
verbs that touch the database are loaded on first use, so importing the
package (as Django does while loading apps) never imports models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .exceptions import (
    EngineDeposedError,
    HandlerError,
    NonDeterminismError,
    OwnershipModeMismatchError,
    PayloadError,
    QueryError,
    StepFailedError,
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
from .runtime.context import ChildHandle, Context, Update
from .runtime.policy import RetryPolicy
from .runtime.registry import workflow

if TYPE_CHECKING:
    from .api import (
        WorkflowDescription,
        WorkflowHandle,
        cancel,
        describe,
        get_handle,
        purge,
        result,
        resume,
        signal,
        start,
        suspend,
    )
    from .updates import query, update

_API = {
    "WorkflowDescription",
    "WorkflowHandle",
    "cancel",
    "describe",
    "get_handle",
    "purge",
    "result",
    "resume",
    "signal",
    "start",
    "suspend",
}


def __getattr__(name: str) -> Any:
    if name in _API:
        from . import api

        return getattr(api, name)
    if name in ("update", "query"):
        from . import updates

        return getattr(updates, name)
    raise AttributeError(f"module 'weft_django' has no attribute {name!r}")


__all__ = [
    "ChildHandle",
    "Context",
    "EngineDeposedError",
    "HandlerError",
    "NonDeterminismError",
    "OwnershipModeMismatchError",
    "PayloadError",
    "QueryError",
    "RetryPolicy",
    "StepFailedError",
    "Update",
    "UpdateRejectedError",
    "UpdateTimeoutError",
    "WaitTimeoutError",
    "WeftError",
    "WeftWorkflowClaimLostWarning",
    "WeftWorkflowWakeDiscardedWarning",
    "WorkflowAlreadyExistsError",
    "WorkflowCancelledError",
    "WorkflowClaimUnavailableError",
    "WorkflowDescription",
    "WorkflowFailedError",
    "WorkflowHandle",
    "WorkflowNotFoundError",
    "WorkflowNotRegisteredError",
    "WorkflowTerminalError",
    "cancel",
    "describe",
    "get_handle",
    "purge",
    "query",
    "result",
    "resume",
    "signal",
    "start",
    "suspend",
    "update",
    "workflow",
]
