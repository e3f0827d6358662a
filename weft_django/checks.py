"""Django system checks for the ``WEFT`` settings (ids ``weft.E00x``, with hints)."""

from __future__ import annotations

from typing import Any

from django.core import checks

from . import conf


@checks.register("weft")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [
        checks.Error(problem.msg, hint=problem.hint, id=problem.id) for problem in conf.problems()
    ]
