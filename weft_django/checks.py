"""Django system checks: the ``WEFT`` settings (``weft.E00x``, with hints), and,
with ``--database``, more live engines than the ownership mode allows
(``weft.W001``: mode ``none`` allows one)."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError

from . import conf
from .ownership.modes import ownership_class


@checks.register("weft")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [
        checks.Error(problem.msg, hint=problem.hint, id=problem.id) for problem in conf.problems()
    ]


@checks.register(checks.Tags.database, "weft")
def check_single_engine_in_mode_none(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """A mode without fencing (``none``) is a hazard with more than one live engine."""
    if not databases or "default" not in databases or conf.problems():
        return []
    settings = conf.get_settings()
    try:
        crowd = ownership_class(settings.ownership).crowd(settings)
    except DatabaseError:
        return []  # not migrated yet: nothing to compare
    if not crowd:
        return []
    return [
        checks.Warning(
            f"Ownership mode {settings.ownership!r} allows one worker, but {len(crowd)} "
            f"engines are live: {', '.join(engine.id for engine in crowd)}.",
            hint="Stop all but one worker, or set WEFT['OWNERSHIP'] = 'workflow-lease'.",
            id="weft.W001",
        )
    ]
