"""Django system checks: the ``WEFT`` settings (``weft.E00x``, with hints); a
Celery beat schedule that runs weft's tasks without the ``celery`` extra
installed (``weft.E011``) or names a task weft does not have (``weft.E012``);
``WEFT["RETENTION"]`` (``weft.E016`` a bad value, ``weft.E017`` a bad key);
and, with ``--database``, more live engines than the ownership mode allows
(``weft.W001``: mode ``none`` allows one)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.db import DatabaseError

from . import conf, retention_settings
from .celery import TASKS
from .ownership.modes import ownership_class


@checks.register("weft")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [
        checks.Error(problem.msg, hint=problem.hint, id=problem.id) for problem in conf.problems()
    ]


@checks.register("weft")
def check_retention(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``WEFT["RETENTION"]``: a bad value is ``weft.E016``, a bad key ``weft.E017``."""
    return [
        checks.Error(problem.msg, hint=problem.hint, id=problem.id)
        for problem in retention_settings.problems()
    ]


def _importable(module: str) -> bool:
    try:
        import_module(module)
    except ImportError:
        return False
    return True


@checks.register("weft")
def check_celery_schedule(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``CELERY_BEAT_SCHEDULE`` entries of weft's tasks need the ``celery`` extra."""
    schedule = getattr(django_settings, "CELERY_BEAT_SCHEDULE", None)
    if not isinstance(schedule, Mapping):
        return []
    named = [entry.get("task") for entry in schedule.values() if isinstance(entry, Mapping)]
    ours = sorted({t for t in named if isinstance(t, str) and t.startswith("weft_django.")})
    found: list[checks.CheckMessage] = []
    unknown = [task for task in ours if task not in TASKS]
    if unknown:
        found.append(
            checks.Error(
                f"CELERY_BEAT_SCHEDULE names weft task(s) that do not exist: {', '.join(unknown)}.",
                hint=f"weft_django's tasks are {', '.join(TASKS)}; build the entries with "
                "weft_django.celery.beat_schedule().",
                id="weft.E012",
            )
        )
    missing = [] if _importable("celery") else ["celery"]
    broker = str(getattr(django_settings, "CELERY_BROKER_URL", "") or "")
    if broker.startswith(("redis://", "rediss://", "unix://")) and not _importable("redis"):
        missing.append("redis")
    if ours and missing:
        found.append(
            checks.Error(
                f"CELERY_BEAT_SCHEDULE runs {', '.join(ours)}, but {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not installed.",
                hint="Install weft_django's Celery extra: pip install 'weft-django[celery]'.",
                id="weft.E011",
            )
        )
    return found


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
