"""A real module with a real function that is never registered as a workflow.

``weft.start("tests.runtime.not_registered.launch_missiles")`` must refuse
without importing this module (see test_bad_input.py).
"""

from __future__ import annotations

IMPORTED = True


def launch_missiles(ctx: object) -> str:
    raise AssertionError("weft_django must never import and run an unregistered dotted path")
