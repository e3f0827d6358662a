"""Settings for the weft_django example project.

Everything that differs between machines comes from the environment through
django-environ: ``DATABASE_URL`` (default: an embedded SQLite file next to this
project), ``WEFT_OWNERSHIP``, ``WEFT_CLAIM_TTL``, ``WEFT_CLAIM_RENEW_INTERVAL``,
``WEFT_TICK_INTERVAL``, ``WEFT_NOTIFY`` and ``CELERY_BROKER_URL``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import django
import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="weft-example-not-secret")
DEBUG = env.bool("DJANGO_DEBUG", default=True)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["*"])

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

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
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
}

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0")
CELERY_TASK_ALWAYS_EAGER = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "weft_django": {"handlers": ["console"], "level": env.str("WEFT_LOG_LEVEL", default="INFO")}
    },
}
