"""The example project's settings: a demo in DEBUG, and with DJANGO_DEBUG=false a
production configuration that ``manage.py check --deploy`` accepts."""

from __future__ import annotations

import os
import secrets
import subprocess

import pytest
from django.db import connection
from django.test import Client

from tests.integration.helpers import database_url, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _env(**values: str) -> dict[str, str]:
    """The environment of a ``manage.py`` child on the test database: none of this
    process's DJANGO_* or WEFT_* variables, plus ``values``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "WEFT_", "PYTEST_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="example_project.settings",
        DATABASE_URL=database_url(connection.settings_dict),
    )
    env.update(values)
    return env


def _production(**values: str) -> dict[str, str]:
    return _env(
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="weft.example.com",
        **values,
    )


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def test_the_production_settings_pass_the_deployment_checks() -> None:
    result = run_manage(["check", "--deploy", "--fail-level", "WARNING"], _production())
    assert result.returncode == 0, _output(result)
    assert "no issues" in result.stdout


@pytest.mark.parametrize("key", [None, "", "weft-example-not-secret"])
def test_production_refuses_to_start_without_a_secret_key_of_its_own(key: str | None) -> None:
    env = _production()
    if key is None:
        del env["DJANGO_SECRET_KEY"]
    else:
        env["DJANGO_SECRET_KEY"] = key
    result = run_manage(["check"], env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "DJANGO_SECRET_KEY is not set" in result.stderr


def test_behind_a_tls_proxy_the_forwarded_scheme_counts_and_redirects_can_be_left_to_it() -> None:
    show = (
        "from django.conf import settings as s; "
        "print(s.SECURE_PROXY_SSL_HEADER, s.SECURE_SSL_REDIRECT)"
    )
    result = run_manage(
        ["shell", "-c", show],
        _production(
            DJANGO_SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https",
            DJANGO_SECURE_SSL_REDIRECT="false",
        ),
    )
    assert result.returncode == 0, _output(result)
    assert result.stdout.split("\n")[-2] == "('HTTP_X_FORWARDED_PROTO', 'https') False"
    bad = run_manage(["check"], _production(DJANGO_SECURE_PROXY_SSL_HEADER="X-Proto"))
    assert bad.returncode != 0
    assert "DJANGO_SECURE_PROXY_SSL_HEADER is a header and its HTTPS value" in bad.stderr


def test_the_demo_settings_stay_debug_and_pass_the_plain_checks() -> None:
    show = "from django.conf import settings as s; print(s.DEBUG, s.SECURE_SSL_REDIRECT)"
    result = run_manage(["shell", "-c", show], _env())
    assert result.returncode == 0, _output(result)
    assert result.stdout.split("\n")[-2] == "True False"
    assert run_manage(["check"], _env()).returncode == 0


def test_pages_may_not_be_framed_by_another_site() -> None:
    response = Client().get("/admin/login/")
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "DENY"
