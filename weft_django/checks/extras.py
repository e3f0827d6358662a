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

from .. import conf
from ..runtime.policy import RETRY_FIELDS, RetryPolicy

BACKEND_PATH = "weft_django.backends.WeftTaskBackend"
ENTRY_KEYS = ("BACKEND", "QUEUES", "OPTIONS")
OPTION_KEYS = ("RETRY", "DATABASE")
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
    return [
        checks.Error(
            f"TASKS[{alias!r}]: {problem}",
            hint="See docs/tasks.md for the backend's QUEUES and OPTIONS.",
            id="weft.E015",
        )
        for alias in aliases
        for problem in backend_problems(django_settings.TASKS[alias])
    ]


def backend_problem(params: Mapping[str, Any]) -> str | None:
    """The first reason why a ``TASKS`` entry for this backend cannot work, or None."""
    found = backend_problems(params)
    return found[0] if found else None


def backend_problems(params: Mapping[str, Any]) -> list[str]:
    """Every reason why a ``TASKS`` entry for this backend cannot work (system check
    weft.E015): each names the key, the value and what is allowed. Empty when valid."""
    found: list[str] = []
    unknown = sorted(str(key) for key in params if key not in ENTRY_KEYS)
    if unknown:
        found.append(
            f"unknown key(s) {', '.join(unknown)} (a TASKS entry of this backend has "
            f"{', '.join(ENTRY_KEYS)})."
        )
    found.extend(_queue_problems(params.get("QUEUES", ["default"])))
    options = params.get("OPTIONS", {})
    if not isinstance(options, Mapping):
        found.append(f"OPTIONS must be a dict (keys: {', '.join(OPTION_KEYS)}), not {options!r}.")
        return found
    unknown = sorted(str(key) for key in options if key not in OPTION_KEYS)
    if unknown:
        found.append(f"unknown OPTIONS {', '.join(unknown)} (known: {', '.join(OPTION_KEYS)}).")
    retry = _retry_problem(options.get("RETRY"))
    if retry:
        found.append(retry)
    database = options.get("DATABASE")
    aliases = list(getattr(django_settings, "DATABASES", {}) or {})
    if database is not None and (not isinstance(database, str) or database not in aliases):
        found.append(
            f"OPTIONS['DATABASE'] must be None (the router's choice) or an alias of "
            f"DATABASES ({', '.join(map(repr, aliases))}), not {database!r}."
        )
    return found


def _queue_problems(queues: Any) -> list[str]:
    if not isinstance(queues, (list, tuple, set, frozenset)):
        return [f"QUEUES must be a list of queue names, not {queues!r}."]
    if not queues:
        return [
            "QUEUES must list the queue names (weft registers one workflow per queue, "
            "django.tasks.<queue>); an empty list (any queue) is not supported."
        ]
    bad = [q for q in queues if not isinstance(q, str) or not _QUEUE_NAME.match(q)]
    if bad:
        return [
            f"QUEUES: queue names must match {_QUEUE_NAME.pattern} (letters, digits, "
            f"_ . -; at most 200), not {', '.join(map(repr, bad))}."
        ]
    return []


def _retry_problem(retry: Any) -> str | None:
    """``OPTIONS["RETRY"]``: RetryPolicy's own rules (its ValueError), named."""
    if retry is None or isinstance(retry, RetryPolicy):
        return None  # a RetryPolicy validated itself when it was made
    if not isinstance(retry, Mapping):
        return (
            "OPTIONS['RETRY'] must be a weft_django.RetryPolicy or a dict of its fields "
            f"({', '.join(RETRY_FIELDS)}), not {retry!r}."
        )
    unknown = sorted(str(key) for key in retry if key not in RETRY_FIELDS)
    if unknown:
        return (
            f"OPTIONS['RETRY'] has unknown field(s) {', '.join(unknown)} "
            f"(RetryPolicy's fields: {', '.join(RETRY_FIELDS)})."
        )
    try:
        RetryPolicy(**retry)
    except ValueError as exc:
        return f"OPTIONS['RETRY']: {exc}."
    return None
