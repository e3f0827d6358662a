"""Django system checks: the ``WEFT`` settings (``weft.E00x``, with hints), and,
with ``--database``, a second live engine in ownership mode ``none`` (``weft.W001``)."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError

from . import conf


@checks.register("weft")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [
        checks.Error(problem.msg, hint=problem.hint, id=problem.id) for problem in conf.problems()
    ]


@checks.register(checks.Tags.database, "weft")
def check_single_engine_in_mode_none(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Mode ``none`` has no fencing: more than one live engine is a hazard."""
    if not databases or "default" not in databases or conf.problems():
        return []
    if conf.get_settings().ownership != conf.MODE_NONE:
        return []
    from .ownership.engines import other_live_engines

    try:
        live = other_live_engines("", grace=2 * conf.get_settings().renew_interval)
    except DatabaseError:
        return []  # not migrated yet: nothing to compare
    if len(live) <= 1:
        return []
    return [
        checks.Warning(
            f"Ownership mode 'none' allows one worker, but {len(live)} engines are live: "
            f"{', '.join(engine.id for engine in live)}.",
            hint="Stop all but one worker, or set WEFT['OWNERSHIP'] = 'workflow-lease'.",
            id="weft.W001",
        )
    ]
