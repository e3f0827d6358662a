"""Fixtures of the integration tests: real worker processes on the test database.

Every test here uses ``django_db(transaction=True)``: the worker processes
only see committed data. They reach the pytest test database through a
``DATABASE_URL`` built from ``connection.settings_dict`` (SQLite: the test
database is a file, see ``example_project/settings.py``), run
:mod:`tests.integration.settings` (the example project plus the
``itapp`` app of this package) and short timings (``helpers.FAST``).
Every process a test started is killed in the fixture's teardown, before the
test database is flushed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.integration import helpers
from tests.integration.helpers import (
    WorkerProcess,
    celery_beat,
    celery_env,
    celery_worker,
    drop_queue,
    run_manage,
    wait_for,
    worker_env,
)
from tests.integration.itapp import workflows as it_workflows  # noqa: F401 (registers it.*)
from tests.integration.itapp.models import StepExecution
from weft_django.models import Engine, EngineStatus

_MIGRATED: set[str] = set()


@pytest.fixture
def it_db(transactional_db: None) -> str:
    """The test database's ``DATABASE_URL``, with the integration app's table in it."""
    url = helpers.database_url(connection.settings_dict)
    if url not in _MIGRATED:
        # The pytest process runs the example project's settings, which do not
        # install itapp: its table is created by the worker settings' migrate.
        # The table survives flushes (not an installed app here): cleared below.
        result = run_manage(["migrate", "itapp", "-v", "0"], worker_env(url))
        assert result.returncode == 0, result.stdout + result.stderr
        _MIGRATED.add(url)
    StepExecution.objects.all().delete()
    return url


class Workers:
    """Start worker processes for one test; ``kill_all()`` runs at teardown."""

    def __init__(self, db_url: str, log_dir: Path) -> None:
        self.db_url = db_url
        self.log_dir = log_dir
        self.started: list[WorkerProcess] = []

    def start(
        self,
        name: str | None = None,
        *,
        concurrency: int = 4,
        args: list[str] | None = None,
        ready: bool = True,
        settings: str = helpers.IT_SETTINGS,
        **env: str,
    ) -> WorkerProcess:
        """Start ``manage.py weft_worker``; with ``ready`` wait for its engine row."""
        name = name or f"worker{len(self.started) + 1}"
        argv = ["--concurrency", str(concurrency), "--shutdown-grace", "5", *(args or [])]
        process = WorkerProcess(
            name, worker_env(self.db_url, settings=settings, **env), self.log_dir, argv
        )
        self.started.append(process)
        if ready:
            self.wait_ready(process)
        return process

    def wait_ready(self, process: WorkerProcess, timeout: float = 60.0) -> str:
        def registered() -> str | None:
            if not process.alive:
                raise AssertionError(f"{process.name} exited early\n{process.tail()}")
            return (
                Engine.objects.filter(pid=process.pid, status=EngineStatus.RUNNING)
                .values_list("id", flat=True)
                .first()
            )

        process.engine_id = wait_for(
            registered, timeout, interval=0.05, what=f"{process.name} to register its engine"
        )
        return process.engine_id

    def by_engine(self, engine_id: str | None) -> WorkerProcess:
        for process in self.started:
            if process.engine_id is not None and process.engine_id == engine_id:
                return process
        raise AssertionError(f"no worker of this test has engine {engine_id!r}")

    def by_pid(self, pid: int) -> WorkerProcess:
        for process in self.started:
            if process.pid == pid:
                return process
        raise AssertionError(f"no worker of this test has pid {pid}")

    def tails(self) -> str:
        return "\n".join(process.tail() for process in self.started)

    def kill_all(self) -> None:
        for process in self.started:
            process.kill()


@pytest.fixture
def workers(it_db: str, tmp_path: Path) -> Iterator[Workers]:
    """``workers.start(...)`` -> a running worker process; all killed at teardown."""
    pool = Workers(it_db, tmp_path)
    try:
        yield pool
    finally:
        pool.kill_all()
        # Shown by pytest for failing tests only.
        print(pool.tails())


@pytest.fixture
def wait(workers: Workers) -> Callable[..., object]:
    """``wait(predicate, timeout, what=...)``: wait_for, printing the worker logs on timeout."""

    def waiter(predicate: Callable[[], object], timeout: float, **kwargs: object) -> object:
        return wait_for(predicate, timeout, on_timeout=workers.tails, **kwargs)  # type: ignore[arg-type]

    return waiter


class CeleryProcesses:
    """``celery -A example_project worker`` / ``beat`` processes of one test, on a
    broker queue of their own (dropped at teardown with the processes)."""

    def __init__(self, db_url: str, log_dir: Path, every: float) -> None:
        self.db_url = db_url
        self.log_dir = log_dir
        self.every = every
        self.queue = f"weft-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.started: list[WorkerProcess] = []

    def env(self, **overrides: str) -> dict[str, str]:
        return celery_env(self.db_url, self.queue, beat_every=self.every, **overrides)

    def worker(
        self, name: str = "celery-worker", *, ready: bool = True, **env: str
    ) -> WorkerProcess:
        process = celery_worker(name, self.env(**env), self.log_dir)
        self.started.append(process)
        if ready:
            self.wait_ready(process)
        return process

    def beat(
        self, name: str = "celery-beat", *, scheduler: str | None = None, **env: str
    ) -> WorkerProcess:
        process = celery_beat(name, self.env(**env), self.log_dir, scheduler=scheduler)
        self.started.append(process)
        return process

    def wait_ready(self, process: WorkerProcess, timeout: float = 60.0) -> None:
        def ready() -> bool:
            if not process.alive:
                raise AssertionError(f"{process.name} exited early\n{process.tail()}")
            return " ready." in process.log()

        wait_for(ready, timeout, interval=0.05, what=f"{process.name} to be ready")

    def tails(self) -> str:
        return "\n".join(process.tail() for process in self.started)

    def stop_all(self) -> None:
        for process in self.started:
            process.kill()
        drop_queue(self.queue)


#: The beat interval of the Celery tests (seconds).
BEAT_EVERY = 1.0


@pytest.fixture
def celery(it_db: str, tmp_path: Path) -> Iterator[CeleryProcesses]:
    """Real Celery worker and beat processes on the test database and Redis."""
    processes = CeleryProcesses(it_db, tmp_path, BEAT_EVERY)
    try:
        yield processes
    finally:
        processes.stop_all()
        print(processes.tails())
