"""manage.py weft_replay and weft_django.testing.replay: read-only replay of stored
histories against the code as it is now (docs/deploying-code.md)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Max

import weft_django as weft
from weft_django import NonDeterminismError, PayloadError
from weft_django.models import Claim, Engine, WorkflowEvent, WorkflowRun
from weft_django.runtime import registry
from weft_django.testing import WorkflowDriver, replay

from .workflows import STATE, versioned_v2


def snapshot() -> tuple[Any, ...]:
    """Row counts, max(seq) and the runs' update times: what a write would change."""
    return (
        WorkflowRun.objects.count(),
        WorkflowEvent.objects.count(),
        WorkflowEvent.objects.aggregate(Max("seq"))["seq__max"],
        Claim.objects.count(),
        Engine.objects.count(),
        sorted(WorkflowRun.objects.values_list("pk", "status", "updated_at")),
        sorted(Claim.objects.values_list("workflow_id", "epoch", "holder_id")),
    )


def replay_command(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("weft_replay", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue() + str(exc)
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def in_flight(driver: WorkflowDriver) -> WorkflowDriver:
    weft.start("tests.patchable", workflow_id="p1")
    weft.start("tests.versioned", version=1, workflow_id="v1")
    weft.start("tests.versioned", workflow_id="v2")
    weft.start("tests.echo", "x", workflow_id="done")
    assert driver.run_until_idle() == {"parked": 3, "completed": 1}
    return driver


def test_compatible_code_exits_0_and_writes_nothing(in_flight: WorkflowDriver) -> None:
    before = snapshot()
    code, out, _err = replay_command()
    assert code == 0
    lines = out.splitlines()
    assert sorted(line.split()[0] for line in lines[:-1]) == ["p1", "v1", "v2"]
    assert all(line.endswith(": ok") for line in lines[:-1])
    assert "tests.versioned v1 (waiting): ok" in out
    assert lines[-1] == "replayed 3 run(s): 3 ok"
    assert snapshot() == before


def test_a_reordered_step_exits_1_naming_the_run_and_event(in_flight: WorkflowDriver) -> None:
    STATE["patch"] = "reordered"
    before = snapshot()
    code, out, err = replay_command()
    assert code == 1
    assert "p1 tests.patchable v1 (waiting): DIVERGES at event #1: history says " in out
    assert "history says wait('signal:go'), the code asks for step('extra')" in out
    assert "replayed 3 run(s): 2 ok, 1 diverge or cannot replay" in err
    assert "v1 tests.versioned v1 (waiting): ok" in out
    assert snapshot() == before
    STATE["patch"] = "patched"  # the fix: a patch around the new step
    assert replay_command()[0] == 0


def test_filters_and_finished_runs(in_flight: WorkflowDriver) -> None:
    code, out, _err = replay_command("--workflow", "tests.versioned", "--limit", "1")
    assert code == 0 and out.splitlines()[-1] == "replayed 1 run(s): 1 ok"
    code, out, _err = replay_command("--status", "completed")
    assert code == 0 and out.splitlines()[0] == "done tests.echo v1 (completed): ok"
    code, out, _err = replay_command("--run", "v2", "done")
    assert code == 0 and out.splitlines()[-1] == "replayed 2 run(s): 2 ok"
    code, out, err = replay_command("--run", "v2", "gone")
    assert code == 1 and "gone: no such run" in out
    assert "replayed 1 run(s): 1 ok, 1 diverge or cannot replay" in err


def test_a_version_the_code_no_longer_has_fails_the_check(in_flight: WorkflowDriver) -> None:
    weft.start("tests.versioned", workflow_id="v2-pending")  # never driven: no history
    registry.unregister("tests.versioned", 2)
    try:
        code, out, err = replay_command("--workflow", "tests.versioned")
    finally:
        registry.register(versioned_v2._weft_definition)  # type: ignore[attr-defined]
    assert "1 pending run(s) of tests.versioned v2: CANNOT REPLAY: not registered" in out
    assert "replayed 2 run(s): 1 ok, 2 diverge or cannot replay" in err
    assert code == 1
    assert (
        "v2 tests.versioned v2 (waiting): CANNOT REPLAY: tests.versioned v2 is not "
        "registered in this code (registered versions: 1)"
    ) in out


def test_export_and_replay_in_a_unit_test(in_flight: WorkflowDriver, tmp_path: Path) -> None:
    target = tmp_path / "p1.json"
    code, out, _err = replay_command("--export", "p1", "--output", str(target))
    assert code == 0 and "wrote the history of 'p1' (2 events)" in out
    history = json.loads(target.read_text())
    assert history["run"]["workflow_version"] == 1
    assert [e["kind"] for e in history["events"]] == ["step", "wait"]
    code, out, _err = replay_command("--export", "p1")
    assert json.loads(out) == history

    replay(target)  # the history's own name and version
    replay(history, "tests.patchable")
    STATE["patch"] = "reordered"
    with pytest.raises(NonDeterminismError) as caught:
        replay(target, "tests.patchable")
    assert caught.value.seq == 1 and caught.value.expected == "step('extra')"

    def plain(ctx: Any) -> None:  # a plain function: replayed as the history's workflow
        ctx.step(lambda: None, name="other")

    with pytest.raises(NonDeterminismError, match="operation #0"):
        replay(history, plain)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--limit", "0"], "--limit must be at least 1"),
        (["--export", "nope"], "No workflow run 'nope'"),
        (["--output", "x.json"], "--output goes with --export"),
    ],
)
def test_bad_input_is_refused(db: None, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("weft_replay", *args, stdout=StringIO(), stderr=StringIO())


@pytest.mark.parametrize(
    "history",
    [
        {},
        {"format": "weft-history", "run": {}, "events": []},
        {"format": "weft-history", "run": {"id": "x"}, "events": [{}]},
    ],
)
def test_replay_refuses_what_is_not_a_history(db: None, history: dict[str, Any]) -> None:
    with pytest.raises(PayloadError, match="history"):
        replay(history, "tests.patchable")


def test_replay_needs_no_database() -> None:
    """A fixture replays without the database (pytest-django refuses any query here)."""
    history = {
        "format": "weft-history",
        "run": {"id": "fixture", "workflow_name": "tests.patchable", "workflow_version": 1},
        "events": [
            {"seq": 0, "kind": "step", "name": "first", "result": "first", "error": None},
            {"seq": 1, "kind": "wait", "name": "signal:go", "result": {"deadline": None}},
        ],
    }
    replay(history)
    history["events"][1]["seq"] = 2  # a gap in the history
    with pytest.raises(NonDeterminismError, match="a gap"):
        replay(history)
