"""``manage.py weft_schedules``: the list with the next firings; pause / resume / trigger."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.schedules.test_firing import ts_tick  # noqa: F401 (registers ts.tick)
from weft_django.models import Schedule

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def declared(weft_settings: Callable[..., None]) -> None:
    weft_settings(
        SCHEDULES={
            "berlin": {"workflow": "ts.tick", "cron": "30 2 * * *", "timezone": "Europe/Berlin"}
        }
    )


def run(*args: str) -> str:
    out = StringIO()
    call_command("weft_schedules", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_list_shows_the_next_firings() -> None:
    items = json.loads(run("--json", "--next", "3"))
    assert [item["name"] for item in items] == ["berlin"]
    assert len(items[0]["next"]) == 3 and all(t.endswith(":30:00Z") for t in items[0]["next"])
    text = run()
    assert "berlin  30 2 * * * (Europe/Berlin)  -> ts.tick" in text
    assert text.count("next:") == 5


def test_pause_resume_trigger() -> None:
    assert "berlin: paused" in run("pause", "berlin", "--reason", "x")
    assert Schedule.objects.get().paused
    assert "unchanged" in run("pause", "berlin")
    assert "berlin: resumed" in run("resume", "berlin")
    assert "triggered run schedule:berlin:" in run("trigger", "berlin")
    with pytest.raises(CommandError):
        run("pause", "nope")
