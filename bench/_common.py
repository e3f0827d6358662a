"""Shared plumbing of the benchmarks: scratch databases, Django setup, worker processes.

Every benchmark creates and migrates its own scratch databases (PostgreSQL
``weft_bench_<name><suffix>_<pid>`` created with psycopg through the
``postgres`` maintenance database, MariaDB/MySQL databases of the same name
created with mysqlclient, and/or a temporary SQLite file; the process id keeps
concurrent runs from sharing one), runs real ``manage.py weft_worker``
processes with ``tests.integration.settings`` (the example project plus the
``itapp`` workflows) pointed at them by ``DATABASE_URL``, and drops the
databases at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.integration.helpers import (  # noqa: E402
    IT_SETTINGS,
    WorkerProcess,
    run_manage,
    wait_for,
)
from tests.integration.helpers import worker_env as _it_worker_env  # noqa: E402

DEFAULT_PG = os.environ.get(
    "WEFT_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
DEFAULT_MYSQL = os.environ.get("WEFT_BENCH_MYSQL_URL", "mysql://root@127.0.0.1:3306/mysql")
#: --db names -> how the tables and the docs call them
DATABASES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mysql": "MariaDB"}

__all__ = [
    "DATABASES",
    "IT_SETTINGS",
    "REPO",
    "Scratch",
    "WorkerProcess",
    "command_line",
    "percentile",
    "print_table",
    "setup_django",
    "wait_for",
    "worker_env",
]


def command_line() -> str:
    """The exact command that produced this output."""
    argv = [Path(sys.executable).name, *sys.argv]
    return " ".join(shlex.quote(part) for part in argv)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (p99 of 100 samples is the 99th smallest)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), int(-(-fraction * len(ordered) // 1))))
    return ordered[rank - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "min": min(values),
        "p50": percentile(values, 0.50),
        "p90": percentile(values, 0.90),
        "p99": percentile(values, 0.99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers], *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for index, row in enumerate(cells):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if index == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"
    return str(value)


class Scratch:
    """Scratch databases of one benchmark; ``drop_all()`` removes them."""

    def __init__(
        self,
        name: str,
        *,
        keep: bool = False,
        pg_url: str = DEFAULT_PG,
        mysql_url: str = DEFAULT_MYSQL,
    ) -> None:
        self.name = name
        self.keep = keep
        self.pg_url = pg_url
        self.mysql_url = mysql_url
        self.pg_names: list[str] = []
        self.mysql_names: list[str] = []
        self.files: list[Path] = []

    def _dbname(self, suffix: str) -> str:
        return f"weft_bench_{self.name}{suffix}_{os.getpid()}"

    def _admin(self) -> Any:
        import psycopg

        parts = urlsplit(self.pg_url)
        return psycopg.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=parts.username or "postgres",
            password=parts.password,
            dbname=(parts.path or "/postgres").lstrip("/") or "postgres",
            autocommit=True,
        )

    def _mysql_admin(self) -> Any:
        import MySQLdb  # the [mysql] extra

        parts = urlsplit(self.mysql_url)
        return MySQLdb.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=parts.username or "root",
            password=parts.password or "",
        )

    def database(self, vendor: str, suffix: str = "") -> str:
        """A fresh, empty database of ``vendor`` (a key of DATABASES); its URL."""
        makers = {"postgresql": self.postgres, "mysql": self.mysql, "sqlite": self.sqlite}
        if vendor not in makers:
            raise SystemExit(f"unknown database {vendor!r}: use {', '.join(makers)}")
        return makers[vendor](suffix)

    def postgres(self, suffix: str = "") -> str:
        """A fresh, empty PostgreSQL database; returns its URL."""
        dbname = self._dbname(suffix)
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{dbname}"')
        self.pg_names.append(dbname)
        parts = urlsplit(self.pg_url)
        return urlunsplit(("postgres", parts.netloc, f"/{dbname}", "", ""))

    def mysql(self, suffix: str = "") -> str:
        """A fresh, empty MariaDB/MySQL database (utf8mb4); returns its URL."""
        dbname = self._dbname(suffix)
        conn = self._mysql_admin()
        try:
            with conn.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS `{dbname}`")
                cursor.execute(f"CREATE DATABASE `{dbname}` CHARACTER SET utf8mb4")
        finally:
            conn.close()
        self.mysql_names.append(dbname)
        parts = urlsplit(self.mysql_url)
        return urlunsplit(("mysql", parts.netloc, f"/{dbname}", "", ""))

    def sqlite(self, suffix: str = "") -> str:
        path = Path(tempfile.gettempdir()) / f"{self._dbname(suffix)}.sqlite3"
        for extra in ("", "-wal", "-shm"):
            Path(f"{path}{extra}").unlink(missing_ok=True)
        self.files.append(path)
        return f"sqlite:///{path}"

    def migrate(self, url: str) -> None:
        result = run_manage(["migrate", "-v", "0"], worker_env(url), timeout=300)
        if result.returncode != 0:
            raise SystemExit(f"migrate failed on {url}:\n{result.stdout}{result.stderr}")

    def drop_all(self) -> None:
        if self.keep:
            return
        if self.pg_names:
            with self._admin() as conn:
                for dbname in self.pg_names:
                    conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        if self.mysql_names:
            conn = self._mysql_admin()
            try:
                with conn.cursor() as cursor:
                    for dbname in self.mysql_names:
                        cursor.execute(f"DROP DATABASE IF EXISTS `{dbname}`")
            finally:
                conn.close()
        for path in self.files:
            for extra in ("", "-wal", "-shm"):
                Path(f"{path}{extra}").unlink(missing_ok=True)


#: DEBUG off is production for the example settings, which then want a key of
#: their own (a benchmark signs nothing that outlives it).
BENCH_SECRET_KEY = "weft-bench-not-a-deployment-key"


def worker_env(url: str, **overrides: str) -> dict[str, str]:
    """The integration tests' worker environment, with DEBUG off (as in production:
    DEBUG=True makes Django keep every query in memory and costs CPU per query)."""
    defaults = {"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": BENCH_SECRET_KEY}
    return _it_worker_env(url, **{**defaults, **overrides})


def setup_django(url: str, **env: str) -> None:
    """Configure this process's Django for ``url`` (call once, before any model import)."""
    os.environ.update(worker_env(url, **env))
    import django

    django.setup()


class Workers:
    """Worker processes of one benchmark run, with their logs in a temp directory."""

    def __init__(self, url: str, log_dir: Path | None = None) -> None:
        self.url = url
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="weft_bench_"))
        self.started: list[WorkerProcess] = []

    def start(self, name: str, *, concurrency: int = 4, **env: str) -> WorkerProcess:
        process = WorkerProcess(
            name,
            worker_env(self.url, **env),
            self.log_dir,
            ["--concurrency", str(concurrency), "--shutdown-grace", "5"],
        )
        self.started.append(process)
        return process

    def wait_ready(self, process: WorkerProcess, timeout: float = 60.0) -> str:
        from weft_django.models import Engine, EngineStatus

        def registered() -> str | None:
            if not process.alive:
                raise SystemExit(f"{process.name} exited early:\n{process.tail()}")
            return (
                Engine.objects.filter(pid=process.pid, status=EngineStatus.RUNNING)
                .values_list("id", flat=True)
                .first()
            )

        process.engine_id = wait_for(registered, timeout, interval=0.05, what="a worker")
        return process.engine_id

    def kill_all(self) -> None:
        for process in self.started:
            process.kill()


def child_result(script: str, argv: Sequence[str], what: str = "the run") -> Any:
    """Run ``script --child *argv`` in a process of its own (Django is configured
    once per process) and return the JSON of its ``RESULT `` line; exit with the
    ends of its output when there is none."""
    command = [sys.executable, str(Path(script).resolve()), "--child", *argv]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{what} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG,
        help="maintenance database used to create/drop the PostgreSQL scratch databases",
    )
    parser.add_argument(
        "--mysql-url",
        default=DEFAULT_MYSQL,
        help="MariaDB/MySQL server (and account) that creates/drops its scratch databases",
    )
    return parser


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    began = time.monotonic()
    value = fn()
    return value, time.monotonic() - began
