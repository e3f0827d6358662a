"""Settings for the weft_django example project.

Everything that differs between machines comes from the environment through
django-environ: ``DATABASE_URL`` (default: an embedded SQLite file next to this
project), ``WEFT_OWNERSHIP``, ``WEFT_CLAIM_TTL``, ``WEFT_CLAIM_RENEW_INTERVAL``,
``WEFT_TICK_INTERVAL``, ``WEFT_NOTIFY``, and for Celery ``CELERY_BROKER_URL``,
``CELERY_BROKER_FOLDER`` (with ``CELERY_BROKER_URL=filesystem://``),
``CELERY_RESULT_BACKEND``, ``CELERY_TASK_DEFAULT_QUEUE`` and the beat intervals
``WEFT_BEAT_SIGNAL_EVERY`` / ``WEFT_BEAT_UPDATE_EVERY`` (seconds; 0 leaves a pass
out of the schedule).

``DJANGO_DEBUG`` (default true: the demo and the tests) turned off means
production: ``DJANGO_SECRET_KEY`` must then be set (the demo's key is public;
the settings refuse to load without one), ``DJANGO_ALLOWED_HOSTS`` names the
site's hosts (default: localhost only), and the site is HTTPS only: secure
cookies, HSTS, redirects to HTTPS, each adjustable for a TLS-terminating proxy
(``DJANGO_SECURE_PROXY_SSL_HEADER``, ``DJANGO_SECURE_SSL_REDIRECT``,
``DJANGO_SECURE_HSTS_SECONDS``, ``DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS``,
``DJANGO_SECURE_HSTS_PRELOAD``, ``DJANGO_CSRF_TRUSTED_ORIGINS``). With them,
``manage.py check --deploy`` passes (docs/deploying.md).
"""

from __future__ import annotations

import os
import tempfile
from importlib.util import find_spec
from pathlib import Path

import django
import environ
from django.core.exceptions import ImproperlyConfigured

from weft_django.beat import beat_schedule

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DJANGO_DEBUG", default=True)
DEMO_SECRET_KEY = "weft-example-not-secret"  # public: for DEBUG (the demo, the tests) only
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=DEMO_SECRET_KEY if DEBUG else "")
if not DEBUG and SECRET_KEY in ("", DEMO_SECRET_KEY):
    raise ImproperlyConfigured(
        "DJANGO_DEBUG is off (production) but DJANGO_SECRET_KEY is not set, or is the "
        "demo's public key: set it to a long random value, e.g. the output of "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'."
    )
ALLOWED_HOSTS = env.list(
    "DJANGO_ALLOWED_HOSTS", default=["*"] if DEBUG else ["localhost", "127.0.0.1", "[::1]"]
)
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
if not DEBUG:
    # HTTPS only. Behind a proxy that terminates TLS, tell Django which header
    # says the request came in over HTTPS, e.g.
    # DJANGO_SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https (and let the
    # proxy set that header itself, never pass on the client's).
    _proxy_header = env.list("DJANGO_SECURE_PROXY_SSL_HEADER", default=[])
    if _proxy_header:
        if len(_proxy_header) != 2:
            raise ImproperlyConfigured(
                "DJANGO_SECURE_PROXY_SSL_HEADER is a header and its HTTPS value, "
                "e.g. HTTP_X_FORWARDED_PROTO,https"
            )
        SECURE_PROXY_SSL_HEADER = (_proxy_header[0], _proxy_header[1])
    SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # HSTS: an hour to start with; raise it (e.g. to 31536000) once the site is
    # known to work over HTTPS only. The preload flag has no effect until the
    # domain is submitted to the browsers' preload list.
    SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=True)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "weft_django",
    "example_project.orders",
]
if find_spec("django_celery_beat") is not None:
    # Optional: lets `celery -A example_project beat --scheduler
    # django_celery_beat.schedulers:DatabaseScheduler` keep the schedule in the database.
    INSTALLED_APPS.append("django_celery_beat")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # X-Frame-Options: DENY, so no other site can frame the admin's one-click
    # actions (clickjacking).
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'weft_example.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several worker processes share the file: wait for the write lock instead
    # of failing, use WAL so readers never block the writer, and take the
    # write lock at BEGIN so a transaction never has to upgrade (Django 5.1+).
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options.setdefault("timeout", 30)
    if django.VERSION >= (5, 1):
        options.setdefault("transaction_mode", "IMMEDIATE")
        options.setdefault("init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
    # The test database is a file, not SQLite's shared-cache memory database:
    # worker threads and the worker processes of tests/integration open their
    # own connections to it (shared-cache memory databases fail with "table is
    # locked" instead of waiting). One file per test process, so concurrent
    # test runs never share it; pytest-django creates and deletes it.
    DATABASES["default"].setdefault("TEST", {})
    DATABASES["default"]["TEST"]["NAME"] = env.str(
        "WEFT_TEST_SQLITE_FILE",
        default=str(Path(tempfile.gettempdir()) / f"weft_test_{os.getpid()}.sqlite3"),
    )

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Notice a dead server or network within seconds rather than at the kernel's
    # TCP timeout (minutes): connect with a timeout, probe idle connections.
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options.setdefault("connect_timeout", 5)
    options.setdefault("keepalives", 1)
    options.setdefault("keepalives_idle", 10)
    options.setdefault("keepalives_interval", 5)
    options.setdefault("keepalives_count", 3)
    # Shown in pg_stat_activity: which process a backend belongs to.
    options.setdefault("application_name", env.str("DATABASE_APPLICATION_NAME", default="weft"))
    # Let psycopg prepare a statement a connection has run 5 times (Django
    # disables this by default for connection poolers). Django's own queries
    # are bound client-side and never prepared; weft's hot fenced write is
    # sent bound server-side so PostgreSQL plans it once per connection.
    options.setdefault("prepare_threshold", 5)
if DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":
    # MySQL's "utf8" is 3-byte UTF-8: ids, names and payloads may hold any
    # character, so connections (and the test database) use utf8mb4.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("charset", "utf8mb4")
    DATABASES["default"].setdefault("TEST", {}).setdefault("CHARSET", "utf8mb4")
    # MySQL has no partial indexes: weft's are created on the same columns
    # without their WHERE clause, which is what models.W037 says.
    SILENCED_SYSTEM_CHECKS = ["models.W037"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"

WEFT = {
    "OWNERSHIP": env.str("WEFT_OWNERSHIP", default="workflow-lease"),
    "CLAIM_TTL": env.float("WEFT_CLAIM_TTL", default=30.0),
    "CLAIM_RENEW_INTERVAL": env.float("WEFT_CLAIM_RENEW_INTERVAL", default=5.0),
    "LEASE_TTL": env.float("WEFT_LEASE_TTL", default=30.0),
    "LEASE_RENEW_INTERVAL": env.float("WEFT_LEASE_RENEW_INTERVAL", default=5.0),
    "TICK_INTERVAL": env.float("WEFT_TICK_INTERVAL", default=0.25),
    "NOTIFY": env.bool("WEFT_NOTIFY", default=True),
    "IDLE_IN_TRANSACTION_TIMEOUT": env.float("WEFT_IDLE_IN_TRANSACTION_TIMEOUT", default=30.0),
    # docs/retention.md; the worker prune pass is off unless WEFT_PRUNE_WORKER_INTERVAL is set.
    "RETENTION": {
        "COMPLETED": env.float("WEFT_RETENTION_COMPLETED", default=7 * 86400.0),
        "WORKER_INTERVAL": env.float("WEFT_PRUNE_WORKER_INTERVAL", default=0.0) or None,
    },
}

# Django's Tasks API (Django >= 6.0): every @task becomes a durable weft run,
# executed by `manage.py weft_worker` (docs/tasks.md; example:
# example_project/orders/background.py). Failed attempts are retried.
if django.VERSION >= (6, 0):
    TASKS = {
        "default": {
            "BACKEND": "weft_django.backends.WeftTaskBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {
                "RETRY": {
                    "max_attempts": env.int("WEFT_TASK_MAX_ATTEMPTS", default=3),
                    "initial_interval": env.float("WEFT_TASK_RETRY_INTERVAL", default=1.0),
                    "backoff": 2.0,
                    "max_interval": 60.0,
                },
            },
        }
    }

# Celery (`pip install 'weft-django[celery]'`; README, "Running with Celery").
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's filesystem transport (bin/demo's default): each message is a file
    # in one folder that every Celery process of this machine reads and writes;
    # no server. CELERY_BROKER_FOLDER holds it (example_project/celery.py
    # creates the folders).
    _broker_folder = Path(
        env.str("CELERY_BROKER_FOLDER", default=str(BASE_DIR / ".weft_demo" / "broker"))
    )
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_folder / "queue"),
        "data_folder_out": str(_broker_folder / "queue"),
        "control_folder": str(_broker_folder / "control"),
    }
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=None)
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
if find_spec("celery") is not None:  # the celery extra (a lean install runs without it)
    CELERY_BEAT_SCHEDULE = beat_schedule(
        signal_every=env.float("WEFT_BEAT_SIGNAL_EVERY", default=30.0) or None,
        update_every=env.float("WEFT_BEAT_UPDATE_EVERY", default=30.0) or None,
        prune_every=env.float("WEFT_BEAT_PRUNE_EVERY", default=0.0) or None,
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "weft_django": {"handlers": ["console"], "level": env.str("WEFT_LOG_LEVEL", default="INFO")}
    },
}
