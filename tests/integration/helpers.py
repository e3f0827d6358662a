"""Helpers shared by the integration tests and the benchmarks: worker processes.

A :class:`WorkerProcess` is a real ``python manage.py weft_worker`` child
process (or, with ``program``, any Python program such as ``-m celery``)
pointed at a database by ``DATABASE_URL``, running
:mod:`tests.integration.settings` unless told otherwise, with its output
captured in a log file. Nothing here imports Django models, so the
benchmarks can use it before Django is set up.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[2]
IT_SETTINGS = "tests.integration.settings"

# Short timings: a crashed owner is taken over after at most
# CLAIM_TTL + 3 x CLAIM_RENEW_INTERVAL = 6 s.
FAST = {
    "WEFT_CLAIM_TTL": "3",
    "WEFT_CLAIM_RENEW_INTERVAL": "1",
    "WEFT_LEASE_TTL": "3",
    "WEFT_LEASE_RENEW_INTERVAL": "1",
    "WEFT_TICK_INTERVAL": "0.1",
}

T = TypeVar("T")


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """A ``DATABASE_URL`` for the database described by a Django ``settings_dict``."""
    engine = settings_dict["ENGINE"]
    name = str(settings_dict["NAME"])
    if engine.endswith("sqlite3"):
        return f"sqlite:///{Path(name).resolve()}"
    servers = {"postgresql": ("postgres", 5432), "mysql": ("mysql", 3306)}
    vendor = "postgresql" if "postgresql" in engine else engine.rsplit(".", 1)[-1]
    if vendor not in servers:
        raise ValueError(f"no DATABASE_URL for engine {engine!r}")
    scheme, default_port = servers[vendor]
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or default_port
    return f"{scheme}://{auth}{host}:{port}/{quote(name, safe='')}"


def worker_env(db_url: str, *, settings: str = IT_SETTINGS, **overrides: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WEFT_", "PYTEST_")) and key != "DJANGO_SETTINGS_MODULE"
    }
    env.update(FAST)
    env.update(
        DATABASE_URL=db_url,
        DJANGO_SETTINGS_MODULE=settings,
        PYTHONUNBUFFERED="1",
        WEFT_LOG_LEVEL="INFO",
    )
    env.update({key: str(value) for key, value in overrides.items()})
    return env


def sqlite_file() -> str | None:
    """The file of the test database when it is SQLite, else None."""
    from django.db import connection

    return str(connection.settings_dict["NAME"]) if connection.vendor == "sqlite" else None


def sqlite_write_locked(path: str) -> bool:
    """True while another connection holds the write lock of the SQLite file ``path``."""
    probe = sqlite3.connect(path, timeout=0.25, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    *,
    interval: float = 0.02,
    what: str = "condition",
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Poll ``predicate`` until it returns something truthy; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = f"\n{on_timeout()}" if on_timeout is not None else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{detail}")
        time.sleep(interval)


class WorkerProcess:
    """One ``manage.py weft_worker`` process with its log captured to a file."""

    def __init__(
        self,
        name: str,
        env: Mapping[str, str],
        log_dir: Path,
        args: list[str] | None = None,
        command: str = "weft_worker",
        program: list[str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = Path(log_dir) / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in wait/kill)
        program = program if program is not None else ["manage.py", command]
        self.args = [sys.executable, *program, *(args or [])]
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            self.args,
            cwd=REPO,
            env=dict(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        self.engine_id: str | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def send(self, sig: int) -> float:
        """Send ``sig``; returns ``time.monotonic()`` right after sending."""
        os.kill(self.proc.pid, sig)
        return time.monotonic()

    def freeze(self, sqlite_path: str | None = None) -> float:
        """SIGSTOP, outside a write transaction when ``sqlite_path`` is given.

        On SQLite a process frozen while it holds the database's single write lock
        blocks every writer until it resumes (docs/ownership.md, the documented
        limit): where a test means "frozen between writes", it re-freezes until no
        write lock is held. Returns ``time.monotonic()`` after the final SIGSTOP.
        """
        for _attempt in range(50):
            frozen_at = self.send(signal.SIGSTOP)
            if sqlite_path is None or not sqlite_write_locked(sqlite_path):
                return frozen_at
            self.send(signal.SIGCONT)
            time.sleep(0.02)
        raise AssertionError(f"{self.name} held SQLite's write lock at 50 freezes in a row")

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        self._log.close()
        return code

    def kill(self) -> None:
        """SIGCONT (in case it is stopped), SIGKILL, reap. Safe to call twice."""
        if self.proc.poll() is None:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(self.proc.pid, sig)
                except ProcessLookupError:
                    break
        try:
            self.proc.wait(timeout=10)
        finally:
            self._log.close()

    def tail(self, lines: int = 40) -> str:
        text = self.log().splitlines()[-lines:]
        return f"--- {self.name} (pid {self.pid}) log tail ---\n" + "\n".join(text)


def run_manage(
    args: list[str], env: Mapping[str, str], *, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run ``python manage.py <args>`` to completion, capturing its output."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# -- Celery ---------------------------------------------------------------------------

#: The Redis database of the Celery tests (broker only; no result backend).
REDIS_URL = os.environ.get("WEFT_TEST_REDIS_URL", "redis://127.0.0.1:6379/5")


def celery_env(
    db_url: str, queue: str, *, beat_every: float = 1.0, **overrides: str
) -> dict[str, str]:
    """The environment of ``celery -A example_project`` processes of one test: its
    database, the test Redis as broker, a queue of its own, a short beat interval."""
    every = str(beat_every)
    settings = {
        "CELERY_BROKER_URL": REDIS_URL,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "WEFT_BEAT_SIGNAL_EVERY": every,
        "WEFT_BEAT_UPDATE_EVERY": every,
    }
    return worker_env(db_url, **{**settings, **overrides})


def celery_worker(
    name: str, env: Mapping[str, str], log_dir: Path, *, concurrency: int = 2
) -> WorkerProcess:
    """``celery -A example_project worker`` (prefork) consuming only the test's queue."""
    args = [
        "worker",
        "--loglevel",
        "INFO",
        "--concurrency",
        str(concurrency),
        "--queues",
        env["CELERY_TASK_DEFAULT_QUEUE"],
        "--hostname",
        f"{name}-{os.getpid()}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    return WorkerProcess(
        name, env, log_dir, args, program=["-m", "celery", "-A", "example_project"]
    )


def celery_beat(
    name: str, env: Mapping[str, str], log_dir: Path, *, scheduler: str | None = None
) -> WorkerProcess:
    """``celery -A example_project beat`` with its schedule file in ``log_dir``."""
    args = [
        "beat",
        "--loglevel",
        "INFO",
        "--schedule",
        str(Path(log_dir) / f"{name}-schedule"),
        "--pidfile",
        str(Path(log_dir) / f"{name}.pid"),
    ]
    if scheduler is not None:
        args += ["--scheduler", scheduler]
    return WorkerProcess(
        name, env, log_dir, args, program=["-m", "celery", "-A", "example_project"]
    )


def redis_problem(url: str = REDIS_URL) -> str | None:
    """Why the Redis at ``url`` cannot be used (None when it answers a PING)."""
    try:
        import redis
    except ImportError:
        return "the redis client is not installed (pip install 'weft-django[celery]')"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2).ping()
    except Exception as exc:
        return f"Redis at {url} is unreachable: {exc}"
    return None


def drop_queue(queue: str, url: str = REDIS_URL) -> None:
    """Delete a test queue and its exchange's bindings from the broker (kombu's
    Redis layout: the queue's list and ``_kombu.binding*.<queue>`` keys)."""
    import redis

    client = redis.Redis.from_url(url)
    client.delete(queue, *client.scan_iter(match=f"_kombu.binding*.{queue}"))
