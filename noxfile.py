"""The supported-versions matrix: Django 5.2 LTS, 6.0, 6.1 on Python 3.11-3.13.

Django 6.0 and 6.1 need Python >= 3.12, so the matrix has seven combinations.

    nox -l                                   # list the sessions
    nox -s "fast(python='3.12', django='6.0')"   # the fast subset on one combination
    nox -s fast                                  # the fast subset on every combination
    nox -s "full(python='3.13', django='6.1')"   # the whole suite (SQLite, then servers)

``full`` runs pytest on SQLite, then on PostgreSQL when ``WEFT_TEST_POSTGRES_URL``
is set and on MariaDB when ``WEFT_TEST_MYSQL_URL`` is set (as bin/test does).
Interpreters are found on PATH, and in pyenv's versions folder when it exists.
Arguments after ``--`` go to pytest. CI runs this through ``.ci/matrix``.
"""

from __future__ import annotations

import glob
import os

import nox

PYTHONS = ["3.11", "3.12", "3.13"]
DJANGOS = ["5.2", "6.0", "6.1"]
# Django 6.x needs Python >= 3.12.
MATRIX = [(p, d) for d in DJANGOS for p in PYTHONS if d == "5.2" or p != "3.11"]
# What the fast subset covers on every combination: the runtime, the public verbs,
# settings and checks, the architecture rules, and the Tasks backend with real workers.
FAST = [
    "tests/runtime/test_api.py",
    "tests/runtime/test_steps.py",
    "tests/test_architecture.py",
    "tests/checks/test_configuration.py",
    "tests/checks/test_extras.py",
    "tests/test_conf.py",
    "tests/worker/test_host.py",
    "tests/integration/test_task_backend.py",
]

nox.options.default_venv_backend = "uv|venv"  # uv when installed: much faster installs
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

# pyenv installs each version under ~/.pyenv/versions/X.Y.Z/bin without putting it on PATH.
_PYENV = os.path.expanduser(os.environ.get("PYENV_ROOT", "~/.pyenv"))
for _bin in sorted(glob.glob(os.path.join(_PYENV, "versions", "3.1[1-3].*", "bin"))):
    if _bin not in os.environ.get("PATH", ""):
        os.environ["PATH"] = f"{os.environ.get('PATH', '')}{os.pathsep}{_bin}"


def install(session: nox.Session, django: str) -> None:
    extras = "postgres,celery,test" + (",beat" if django == "5.2" else "")
    if session.posargs and "--mysql" in session.posargs:
        extras += ",mysql"
    session.install("-q", f"Django~={django}.0", "-e", f".[{extras}]")


def _pytest_args(session: nox.Session) -> list[str]:
    return [arg for arg in session.posargs if arg != "--mysql"]


@nox.session
@nox.parametrize("python,django", MATRIX)
def fast(session: nox.Session, django: str) -> None:
    """The fast subset, on SQLite."""
    install(session, django)
    session.env.pop("DATABASE_URL", None)  # SQLite: the example project's default
    session.run("python", "-m", "pytest", "-q", *FAST, *_pytest_args(session))


@nox.session
@nox.parametrize("python,django", MATRIX)
def full(session: nox.Session, django: str) -> None:
    """The whole suite on SQLite, then on each server named in the environment.

    ``WEFT_FULL_PASS=sqlite`` runs only mypy and the SQLite pass,
    ``WEFT_FULL_PASS=servers`` only the server passes, without the real-process
    tests but the Tasks API's (bin/test runs them all on the servers): ``.ci/matrix full`` runs the
    two at once in one virtualenv (``--install-only`` first, then ``-R``).
    """
    install(session, django)
    only = os.environ.get("WEFT_FULL_PASS", "")
    if only not in ("", "sqlite", "servers"):
        session.error(f"WEFT_FULL_PASS must be sqlite or servers, not {only!r}")
    session.env.pop("DATABASE_URL", None)  # SQLite first: the example project's default
    args = ["-m", "pytest", "-q", *_pytest_args(session)]
    if only != "servers":
        mypy_cache = f"{session.virtualenv.location}/mypy"
        session.run("python", "-m", "mypy", "--cache-dir", mypy_cache)
        sqlite_args = args
        if only == "sqlite":
            # The long campaigns (chaos, a thousand parked runs taken over) test
            # the protocol, not Django: bin/test runs them on every database.
            sqlite_args = [
                *args,
                "--ignore=tests/integration/test_chaos.py",
                "--ignore=tests/integration/test_takeover_scale.py",
            ]
        session.run("python", *sqlite_args)
    if only == "sqlite":
        return
    if only == "servers":
        # Beside bin/test's full server passes (Django 5.2): every test but the
        # real-process ones, which exercise the protocol, not Django's version
        # (they run on this Django in the SQLite pass), plus the Tasks API's.
        args += ["-m", "not integration or django_tasks"]
    for variable in ("WEFT_TEST_POSTGRES_URL", "WEFT_TEST_MYSQL_URL"):
        url = os.environ.get(variable)
        if url:
            session.log(f"pytest on {url}")
            session.run("python", *args, env={"DATABASE_URL": url})
