"""``WEFT["QUEUES"]`` (docs/flow-control.md): ``weft.E040`` not a dict,
``weft.E041`` a bad queue name, ``weft.E042`` an unknown option, ``weft.E043``
a bad concurrency limit, ``weft.E044`` a bad rate or burst, ``weft.E045``
concurrency limits in ownership mode ``lease``; and ``weft.E046`` a workflow
whose ``@weft.workflow(queue=...)`` names no configured queue."""

from __future__ import annotations

from typing import Any

from django.core import checks

from ..exceptions import WeftConfigurationError
from ..flow import settings as flow_settings
from ..runtime import registry


@checks.register("weft")
def check_queues(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found = flow_settings.problems()
    messages: list[checks.CheckMessage] = [
        checks.Error(problem.msg, hint=problem.hint, id=problem.id) for problem in found
    ]
    if found:
        return messages
    try:
        configured = flow_settings.queues()
    except WeftConfigurationError:
        return messages  # settings.WEFT itself is wrong: weft.E001 says so
    for name, versions in sorted(registry.registered_versions().items()):
        for version in versions:
            queue = registry.get(name, version).queue
            if queue is not None and queue not in configured:
                messages.append(
                    checks.Error(
                        f"Workflow {name!r} (version {version}) names queue {queue!r}, which "
                        "is not in WEFT['QUEUES'].",
                        hint=f"Add WEFT['QUEUES'][{queue!r}] = {{...}}, or fix the name.",
                        id="weft.E046",
                    )
                )
    return messages
