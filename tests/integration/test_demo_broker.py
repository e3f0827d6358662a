"""The demo's Celery broker: ``celery -A example_project worker`` and ``beat`` on
kombu's filesystem transport (``CELERY_BROKER_URL=filesystem://``, a folder, no
server), as ``bin/demo`` runs them: the beat passes run and store their summaries.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import BEAT_EVERY, CeleryProcesses
from tests.integration.helpers import wait_for
from weft_django.models import Engine, EngineKind, EngineStatus

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def filesystem_celery(it_db: str, tmp_path: Path) -> Iterator[CeleryProcesses]:
    """Celery processes of the example project on a filesystem broker in tmp_path
    (no Redis: nothing to drop at teardown)."""
    processes = CeleryProcesses(it_db, tmp_path, BEAT_EVERY)
    try:
        yield processes
    finally:
        for process in processes.started:
            process.kill()
        print(processes.tails())


def pass_summaries() -> set[str]:
    rows = Engine.objects.filter(kind=EngineKind.CELERY, status=EngineStatus.STOPPED)
    return {name for passes in rows.values_list("passes", flat=True) for name in passes}


def test_beat_passes_run_on_the_filesystem_broker(
    filesystem_celery: CeleryProcesses, tmp_path: Path
) -> None:
    folder = tmp_path / "broker"  # not there yet: the example's Celery app creates it
    broker = {"CELERY_BROKER_URL": "filesystem://", "CELERY_BROKER_FOLDER": str(folder)}
    worker = filesystem_celery.worker(**broker)
    beat = filesystem_celery.beat(**broker)

    wait_for(
        lambda: {"signal_poll_pass", "update_poll_pass"} <= pass_summaries(),
        60,
        what="both beat passes to store their summaries",
        on_timeout=filesystem_celery.tails,
    )

    assert (folder / "queue").is_dir() and (folder / "control").is_dir()
    # the summary row commits before the worker's log line is written: wait for both lines
    wait_for(
        lambda: all(
            f"{name} engine=" in worker.log() for name in ("signal_poll_pass", "update_poll_pass")
        ),
        30,
        what="both passes' log lines in the worker's log",
        on_timeout=filesystem_celery.tails,
    )
    for process in (beat, worker):
        process.send(signal.SIGTERM)
    assert beat.wait(30) == 0, beat.tail()
    assert worker.wait(60) == 0, worker.tail()
