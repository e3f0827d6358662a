"""Optional features and their extras: system checks ``weft.E013``-``weft.E015``.

weft_django always imports Django and prometheus-client; everything else
comes with an extra (docs/getting-started.md, "Extras"). A feature that is
configured without its extra is reported here at startup, with the command
that installs it, instead of failing later inside a worker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.util import find_spec
from typing import Any

from django.conf import settings as django_settings
from django.core import checks

from . import conf
from .runtime.policy import RetryPolicy

BACKEND_PATH = "weft_django.backends.WeftTaskBackend"
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


def installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def has_django_tasks() -> bool:
    """Django >= 6.0 (the Tasks API)."""
    return installed("django.tasks")


def task_backend_aliases() -> list[str]:
    tasks = getattr(django_settings, "TASKS", None)
    if not isinstance(tasks, Mapping):
        return []
    return [
        alias
        for alias, params in tasks.items()
        if isinstance(params, Mapping) and params.get("BACKEND") == BACKEND_PATH
    ]


def postgres_aliases() -> list[str]:
    databases = getattr(django_settings, "DATABASES", {}) or {}
    return [
        alias
        for alias, db in databases.items()
        if isinstance(db, Mapping) and "postgresql" in str(db.get("ENGINE", ""))
    ]


@checks.register("weft")
def check_postgres_driver(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """PostgreSQL with NOTIFY wake-ups needs psycopg 3 (the ``postgres`` extra)."""
    on_postgres = postgres_aliases()
    if not on_postgres or conf.problems() or not conf.get_settings().notify:
        return []
    if installed("psycopg"):
        return []
    return [
        checks.Error(
            f"Database(s) {', '.join(on_postgres)} use PostgreSQL with WEFT['NOTIFY'] = True, "
            "but psycopg 3 is not installed (weft listens for wake-ups with it).",
            hint="Install weft_django's PostgreSQL extra: pip install 'weft-django[postgres]' "
            "(or set WEFT['NOTIFY'] = False to poll instead).",
            id="weft.E013",
        )
    ]


@checks.register("weft")
def check_task_backend(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``TASKS`` naming WeftTaskBackend needs Django >= 6.0 and valid QUEUES/OPTIONS."""
    aliases = task_backend_aliases()
    if not aliases:
        return []
    if not has_django_tasks():
        return [
            checks.Error(
                f"TASKS[{aliases[0]!r}] uses {BACKEND_PATH}, but this Django has no Tasks API "
                "(django.tasks is new in Django 6.0).",
                hint="Upgrade to Django >= 6.0, or remove the TASKS entry.",
                id="weft.E014",
            )
        ]
    found: list[checks.CheckMessage] = []
    for alias in aliases:
        problem = backend_problem(django_settings.TASKS[alias])
        if problem:
            found.append(
                checks.Error(
                    f"TASKS[{alias!r}]: {problem}",
                    hint="See docs/tasks.md for the backend's QUEUES and OPTIONS.",
                    id="weft.E015",
                )
            )
    return found


def backend_problem(params: Mapping[str, Any]) -> str | None:
    """Why a ``TASKS`` entry for this backend cannot work (system check weft.E015)."""
    queues = params.get("QUEUES", ["default"])
    if not isinstance(queues, (list, tuple, set)) or not queues:
        return (
            "QUEUES must list the queue names (weft registers one workflow per queue, "
            "django.tasks.<queue>); an empty list (any queue) is not supported."
        )
    bad = [q for q in queues if not isinstance(q, str) or not _QUEUE_NAME.match(q)]
    if bad:
        return f"queue names must match {_QUEUE_NAME.pattern}, not {bad!r}."
    options = params.get("OPTIONS", {}) or {}
    retry = options.get("RETRY")
    if retry is not None and not isinstance(retry, (RetryPolicy, Mapping)):
        return f"OPTIONS['RETRY'] must be a weft_django.RetryPolicy or a dict, not {retry!r}."
    if isinstance(retry, Mapping):
        try:
            RetryPolicy(**retry)
        except TypeError as exc:
            return f"OPTIONS['RETRY']: {exc}."
    unknown = sorted(set(options) - {"RETRY", "DATABASE"})
    if unknown:
        return f"unknown OPTIONS {unknown!r} (known: RETRY, DATABASE)."
    return None
