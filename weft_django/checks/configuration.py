"""Django system checks: the ``WEFT`` settings (``weft.E00x``, with hints); a
Celery beat schedule that runs weft's tasks without the ``celery`` extra or
the broker's kombu transport installed (``weft.E011``) or names a task weft
does not have (``weft.E012``); ``WEFT["RETENTION"]`` (``weft.E016`` a bad
value, ``weft.E017`` a bad key); under ``manage.py check``, weft_django
migrations not applied on weft's database (``weft.E018``, which
``weft_worker`` also refuses to start on: :func:`migration_problem`); and,
with ``--database``, more live engines than the ownership mode allows
(``weft.W001``: mode ``none`` allows one)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import import_module
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from .. import conf
from ..beat import TASKS
from ..models import db_for
from ..ownership import ownership_class
from ..retention import settings as retention_settings

CELERY_EXTRA = "pip install 'weft-django[celery]'"
# kombu's transports that need the redis client (celery[redis]).
REDIS_TRANSPORTS = ("redis", "rediss", "sentinel")
# Celery's extra for each other kombu transport alias that has one.
TRANSPORT_EXTRAS = {
    "sqs": "sqs",
    "SQS": "sqs",
    "sqla": "sqlalchemy",
    "sqlalchemy": "sqlalchemy",
    "mongodb": "mongodb",
    "zookeeper": "zookeeper",
    "consul": "consul",
    "gcpubsub": "gcpubsub",
    "pyro": "pyro",
    "slmq": "slmq",
    "SLMQ": "slmq",
    "librabbitmq": "librabbitmq",
}


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
                "weft_django.beat.beat_schedule().",
                id="weft.E012",
            )
        )
    if not ours:
        return found
    if not _importable("celery"):
        found.append(
            checks.Error(
                f"CELERY_BEAT_SCHEDULE runs {', '.join(ours)}, but celery is not installed.",
                hint=f"Install weft_django's Celery extra: {CELERY_EXTRA}.",
                id="weft.E011",
            )
        )
        return found
    failure = broker_transport_failure(getattr(django_settings, "CELERY_BROKER_URL", None))
    if failure:
        transport, error = failure
        found.append(
            checks.Error(
                f"CELERY_BEAT_SCHEDULE runs {', '.join(ours)}, but Celery cannot load the "
                f"{transport!r} transport of CELERY_BROKER_URL: {error.rstrip('.')}.",
                hint=transport_hint(transport),
                id="weft.E011",
            )
        )
    return found


def transport_hint(transport: str) -> str:
    """What installs the packages kombu's ``transport`` needs."""
    if transport in REDIS_TRANSPORTS:
        return (
            f"Install weft_django's Celery extra: {CELERY_EXTRA} (it brings "
            "celery[redis]: redis and packaging)."
        )
    if transport in TRANSPORT_EXTRAS:
        extra = TRANSPORT_EXTRAS[transport]
        return f"Install that transport's packages: pip install 'celery[{extra}]'."
    return f"Install the packages kombu's {transport!r} transport needs."


def broker_transport(broker: Any) -> str:
    """The kombu transport alias of a Celery broker URL, or of the first of a list
    or ``;``-separated failover URLs (Celery's default: amqp)."""
    if isinstance(broker, (list, tuple)):
        broker = broker[0] if broker else None
    url = str(broker or "").split(";", 1)[0].strip()
    if "://" not in url:
        return "amqp"
    return url.split("://", 1)[0].split("+", 1)[0]


def broker_transport_failure(broker: Any) -> tuple[str, str] | None:
    """Load the kombu transport of the broker URL ``broker`` as a Celery worker
    would (import its module and create it, which imports its client library),
    without connecting: ``(transport alias, what failed)`` when that fails, else
    None. A transport kombu does not know is Celery's to report."""
    transport = broker_transport(broker)
    try:
        from kombu import Connection
        from kombu.transport import TRANSPORT_ALIASES, resolve_transport
    except ImportError as exc:
        return (transport, f"kombu cannot be imported ({exc})")
    if transport not in TRANSPORT_ALIASES:
        return None
    try:
        cls = resolve_transport(transport)
        if cls is not None:
            cls(client=Connection(transport=cls))
    except Exception as exc:  # kombu's modules fail in many ways without their library
        libraries = ("redis", "packaging") if transport in REDIS_TRANSPORTS else ()
        missing = [library for library in libraries if not _importable(library)]
        if missing:
            return (transport, f"{' and '.join(missing)} cannot be imported")
        return (transport, f"{type(exc).__name__}: {exc}")
    return None


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
            hint=f"Stop all but one worker, or set WEFT['OWNERSHIP'] = {conf.WORKFLOW_LEASE!r}.",
            id="weft.W001",
        )
    ]


# -- weft.E018: weft_django's migrations, applied? -------------------------------------

APP_LABEL = "weft_django"


def unapplied_migrations(using: str) -> list[str]:
    """The names of weft_django's migrations not applied on database ``using``, in
    order (all of them on a database that was never migrated). Reads the
    ``django_migrations`` table; raises DatabaseError when the database cannot
    be reached."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(connections[using], ignore_no_migrations=True)
    graph = loader.graph
    needed = dict.fromkeys(
        node
        for leaf in graph.leaf_nodes(APP_LABEL)
        for node in graph.forwards_plan(leaf)
        if node[0] == APP_LABEL
    )
    return [name for app, name in needed if (app, name) not in loader.applied_migrations]


def migration_problem(using: str | None = None) -> str | None:
    """Why weft cannot work on database ``using`` (default: the one weft's tables
    live on) because of unapplied migrations, or None. None too when no database
    is configured or it cannot be reached: nothing to compare (a worker then
    fails on its first statement with its own message)."""
    try:
        alias = db_for(using)
        missing = unapplied_migrations(alias)
    except (DatabaseError, ImproperlyConfigured):
        return None
    if not missing:
        return None
    names = ", ".join(missing) if len(missing) <= 3 else f"{missing[0]} to {missing[-1]}"
    where = "" if alias == DEFAULT_DB_ALIAS else f" --database {alias}"
    return (
        f"Database {alias!r} has {len(missing)} unapplied weft_django migration(s) "
        f"({names}): weft's tables there are missing or older than this version of "
        f"weft_django, and workers would fail on them; run `manage.py migrate{where}` first."
    )


def worker_migration_problem() -> str | None:
    """:func:`migration_problem` for a worker about to start: its refusal, unless
    ``weft.E018`` is in ``SILENCED_SYSTEM_CHECKS`` (which silences the check too)."""
    if "weft.E018" in getattr(django_settings, "SILENCED_SYSTEM_CHECKS", ()):
        return None
    return migration_problem()


def weft_databases() -> list[str]:
    """The aliases weft's tables live on: the router's choice for weft's models,
    and every ``OPTIONS["DATABASE"]`` of a configured WeftTaskBackend."""
    from .extras import task_backend_aliases

    found = [db_for(None)]
    for alias in task_backend_aliases():
        options = django_settings.TASKS[alias].get("OPTIONS")
        database = options.get("DATABASE") if isinstance(options, Mapping) else None
        if isinstance(database, str) and database in connections:
            found.append(database)
    return list(dict.fromkeys(found))


def running_command() -> str | None:
    """The management command of this process (``manage.py <command>``,
    ``django-admin <command>``, ``python -m django <command>``), or None."""
    return sys.argv[1] if len(sys.argv) > 1 else None


@checks.register("weft")
def check_migrations_applied(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``weft.E018``: weft_django's migrations not all applied on weft's database.

    Only under ``manage.py check``: every other command that runs the system
    checks would refuse too, and ``migrate`` (which runs them before it
    migrates), ``makemigrations`` or a deploy script's own commands must not.
    ``weft_worker`` refuses to start on the same problem by itself."""
    if running_command() != "check":
        return []
    return [
        checks.Error(
            problem,
            hint="Run `manage.py migrate` (every database weft uses) before starting workers.",
            id="weft.E018",
        )
        for alias in weft_databases()
        if (problem := migration_problem(alias))
    ]
