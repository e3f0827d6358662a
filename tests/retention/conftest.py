"""Fixtures for the retention tests: the runtime tests' reset of workflow state
(tests/runtime/workflows.py registers the workflows the pruner tests start)."""

from tests.runtime.conftest import _reset_workflow_state

__all__ = ["_reset_workflow_state"]
