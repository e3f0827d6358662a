"""``manage.py weft_worker``: refusing to start writes nothing (docs/ownership.md).

In-process through ``call_command`` and as a real process through
``manage.py`` (what an operator sees: exit status and one paragraph on
stderr).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

import weft_django as weft
from tests.integration.helpers import database_url, run_manage, worker_env
from weft_django.models import Engine, OwnershipMarker, RunStatus, WorkflowRun

ESTABLISHED = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
EXAMPLE_SETTINGS = "example_project.settings"


def _lease_marker() -> None:
    OwnershipMarker.objects.all().delete()
    OwnershipMarker.objects.create(id=1, mode="lease", established_at=ESTABLISHED)


def _nothing_written(marker_mode: str | None) -> None:
    assert not Engine.objects.exists()
    assert list(OwnershipMarker.objects.values_list("mode", flat=True)) == (
        [marker_mode] if marker_mode else []
    )


@pytest.mark.django_db
def test_invalid_settings_refuse_to_start_and_write_nothing(weft_settings):
    weft_settings(CLAIM_TTL=2.0, CLAIM_RENEW_INTERVAL=1.0)
    with pytest.raises(CommandError) as caught:
        call_command("weft_worker", "--once")
    message = str(caught.value)
    assert message.startswith("weft_worker cannot start: Invalid WEFT settings:")
    assert "weft.E006" in message and "CLAIM_TTL" in message
    assert message.endswith("Nothing was written to the database.")
    _nothing_written(None)


@pytest.mark.django_db
def test_unknown_mode_refuses_to_start(weft_settings):
    weft_settings(OWNERSHIP="leases")
    with pytest.raises(CommandError, match=r"weft\.E003"):
        call_command("weft_worker", "--once")
    _nothing_written(None)


@pytest.mark.django_db
def test_marker_mismatch_refuses_to_start_and_writes_nothing(weft_settings):
    _lease_marker()
    with pytest.raises(CommandError) as caught:
        call_command("weft_worker", "--once")
    message = str(caught.value)
    assert "'workflow-lease'" in message and "'lease'" in message
    assert ESTABLISHED.isoformat() in message
    assert "weft_marker --reset" in message
    assert message.endswith("Nothing was written to the database.")
    _nothing_written("lease")


@pytest.mark.django_db
def test_concurrency_below_one_is_refused(weft_settings):
    with pytest.raises(CommandError, match="--concurrency must be at least 1"):
        call_command("weft_worker", "--once", "--concurrency", "0")
    _nothing_written(None)


@pytest.mark.django_db(transaction=True)
def test_once_runs_the_work_then_exits(weft_settings):
    weft_settings(TICK_INTERVAL=0.02, CLAIM_TTL=1.0, CLAIM_RENEW_INTERVAL=0.2)
    run_ids = [weft.start("orders.fulfil_order", 7, workflow_id=f"cmd-{i}").id for i in range(2)]
    call_command("weft_worker", "--once", "--concurrency", "2")
    # fulfil_order sleeps 2 s durably: --once leaves it parked on its timer.
    statuses = set(WorkflowRun.objects.filter(pk__in=run_ids).values_list("status", flat=True))
    assert statuses == {RunStatus.WAITING}
    engine = Engine.objects.get()
    assert engine.status == "stopped"


# -- as a process ---------------------------------------------------------------------


def _manage_worker(**env: str):
    url = database_url(connection.settings_dict)
    return run_manage(
        ["weft_worker", "--once"], worker_env(url, settings=EXAMPLE_SETTINGS, **env), timeout=60
    )


def _one_paragraph(stderr: str) -> str:
    text = stderr.strip()
    assert text, "no explanation on stderr"
    assert "\n\n" not in text and "Traceback" not in text, text
    return text


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_process_with_invalid_settings_exits_non_zero_and_writes_nothing():
    result = _manage_worker(WEFT_CLAIM_TTL="2", WEFT_CLAIM_RENEW_INTERVAL="1")
    assert result.returncode != 0
    text = _one_paragraph(result.stderr)
    assert text.startswith("CommandError: weft_worker cannot start: Invalid WEFT settings")
    assert "weft.E006" in text
    _nothing_written(None)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_process_with_marker_mismatch_exits_non_zero_and_writes_nothing():
    _lease_marker()
    result = _manage_worker(WEFT_OWNERSHIP="workflow-lease")
    assert result.returncode != 0
    text = _one_paragraph(result.stderr)
    assert text.startswith("CommandError: weft_worker cannot start:")
    assert "ownership mode 'lease'" in text and "Nothing was written" in text
    _nothing_written("lease")
