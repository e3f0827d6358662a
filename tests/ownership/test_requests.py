"""The typed requests of the fenced writes: the fence token, what each request
carries, the columns it maps to, and which strategy has which one-statement form."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from weft_django.conf import get_settings
from weft_django.models import RunStatus, WorkflowRun
from weft_django.ownership import Checkpoint, Fence, Finish, Form, Park, Stamp, TakeSignal
from weft_django.ownership.modes import ownership_for
from weft_django.ownership.writes.requests import FORMS_BY_VENDOR, NoOneStatementForm, forms_on
from weft_django.ownership.writes.single import (
    V_COLUMNS,
    FencedWrite,
    fenced_finish,
    write_many_statement,
)

from ..factories import EngineFactory, WorkflowRunFactory

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
ROW = ("r", 1, "step", "s", "1", None, "engine-a", 3, T0)


def _no_clock() -> datetime:
    raise AssertionError("the clock was read")


def test_a_fence_is_a_frozen_token_whose_params_are_the_claim_check() -> None:
    fence = Fence("r", "engine-a", 3)
    assert fence.params() == ["r", "engine-a", 3]  # workflow_id, holder_id, epoch
    assert fence == Fence("r", "engine-a", 3) and hash(fence) == hash(Fence("r", "engine-a", 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fence.epoch = 4  # type: ignore[misc]
    assert not hasattr(fence, "__dict__")  # slotted


@pytest.mark.parametrize("request_type", [Fence, Stamp, Checkpoint, Park, Finish, TakeSignal])
def test_every_request_is_frozen_and_slotted(request_type: type) -> None:
    assert request_type.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert "__slots__" in vars(request_type)


def test_a_stamp_reads_the_clock_only_off_the_database_clock() -> None:
    on_db = Stamp("clock_timestamp()", _no_clock)
    assert on_db.sql_and_params() == ("clock_timestamp()", [])
    assert on_db.value() is None
    off_db = Stamp(None, lambda: T0)
    assert off_db.sql_and_params() == ("%s", [T0])
    assert off_db.value() == T0


def test_each_request_names_its_form() -> None:
    stamp = Stamp(None, lambda: T0)
    assert Checkpoint([ROW]).form is Form.CHECKPOINT
    assert Checkpoint([ROW], mark_running=True).form is Form.CHECKPOINT_RUNNING
    assert Park([], "{}", None, None, stamp).form is Form.PARK
    assert Finish([], "completed", "1", None, "", 300.0, stamp).form is Form.FINISH
    assert TakeSignal("go", 2, [], T0, False, None, stamp).form is Form.TAKE_SIGNAL


def _row_of(write: FencedWrite) -> dict[str, object]:
    return dict(zip(V_COLUMNS, write.values(), strict=True))


def test_a_checkpoint_maps_to_its_row_of_the_group_statement() -> None:
    fence = Fence("r", "engine-a", 3)
    write = FencedWrite.of_checkpoint(fence, Checkpoint([ROW]))
    assert write.rows == [ROW]
    assert _row_of(write) == {
        "workflow_id": "r",
        "epoch": 3,
        "park": False,
        "waiting_on": None,
        "wake_at": None,
        "hint_seen": None,
        "running": False,
        "stamp": None,
        "free_slots": False,
    }
    deadline = T0 + timedelta(hours=1)
    running = FencedWrite.of_checkpoint(fence, Checkpoint([ROW], True, deadline))
    assert _row_of(running) | {"running": True, "wake_at": deadline} == _row_of(running)
    assert _row_of(running)["park"] is False


def test_a_park_maps_to_its_row_of_the_group_statement() -> None:
    fence = Fence("r", "engine-a", 3)
    hint, wake = T0 - timedelta(seconds=1), T0 + timedelta(minutes=5)
    park = Park([ROW], '{"kind":"signal"}', wake, hint, Stamp("clock_timestamp()", _no_clock))
    assert _row_of(FencedWrite.of_park(fence, park)) == {
        "workflow_id": "r",
        "epoch": 3,
        "park": True,
        "waiting_on": '{"kind":"signal"}',
        "wake_at": wake,
        "hint_seen": hint,
        "running": False,
        "stamp": None,  # clock_timestamp()
        "free_slots": False,
    }
    off_clock = dataclasses.replace(park, stamp=Stamp(None, lambda: T0))
    assert _row_of(FencedWrite.of_park(fence, off_clock))["stamp"] == T0
    limited = dataclasses.replace(park, free_slots=True)  # a turn the gate admitted
    assert _row_of(FencedWrite.of_park(fence, limited))["free_slots"] is True


def test_the_group_statement_names_the_columns_of_its_rows() -> None:
    write = FencedWrite.of_checkpoint(Fence("r", "engine-a", 3), Checkpoint([ROW]))
    sql, params = write_many_statement(connection, "engine-a", [write])
    assert sql.startswith(
        "WITH v (workflow_id, epoch, park, waiting_on, wake_at, hint_seen, running, stamp, "
        "free_slots) "
        "AS (VALUES (%s, %s::bigint, "
    )
    assert params[: len(V_COLUMNS) + 1] == [*write.values(), "engine-a"]


def test_the_one_statement_forms_of_each_database() -> None:
    assert forms_on("postgresql") == frozenset(Form)
    assert forms_on("sqlite") == forms_on("mysql") == {Form.CHECKPOINT}
    assert forms_on("oracle") == frozenset()
    assert set(FORMS_BY_VENDOR) == {"postgresql", "sqlite", "mysql"}


@pytest.mark.parametrize(
    ("mode", "forms"),
    [
        ("workflow-lease", forms_on(connection.vendor)),
        ("none", forms_on(connection.vendor) & {Form.PARK, Form.TAKE_SIGNAL}),
        ("lease", frozenset()),
    ],
)
def test_each_strategy_says_once_which_forms_it_has(
    mode: str, forms: frozenset[Form], weft_settings: Callable[..., None]
) -> None:
    weft_settings(OWNERSHIP=mode)
    ownership = ownership_for("engine-a", get_settings())
    assert ownership.one_statement == forms
    fence = ownership.fence_for("r", 3)
    assert fence == Fence("r", "engine-a", 3)
    if Form.CHECKPOINT not in forms:
        with pytest.raises(NoOneStatementForm, match="checkpoint"):
            ownership.insert_fenced(fence, Checkpoint([ROW]))
    if Form.FINISH not in forms:
        stamp = Stamp(None, lambda: T0)
        with pytest.raises(NoOneStatementForm, match="finish"):
            ownership.finish_fenced(fence, Finish([], "completed", "1", None, "", 300.0, stamp))


@pytest.mark.postgres
def test_a_finish_sets_the_run_columns_it_names(db: None) -> None:
    engine = EngineFactory()
    parent = WorkflowRunFactory(id="parent", waiting=True)
    WorkflowRunFactory(id="r", running=True, parent_id=parent.id, claim=engine, wake_at=T0)
    finish = Finish(
        [("r", 1, "step", "s", "2", None, engine.id, 1, T0)],
        status=RunStatus.FAILED,
        result_json=None,
        error_json=json.dumps({"type": "Boom"}),
        parent_id="parent",
        response_ttl=300.0,
        stamp=Stamp(None, lambda: T0),
    )
    assert fenced_finish("default", Fence("r", engine.id, 1), finish) is True
    run = WorkflowRun.objects.get(pk="r")
    assert (run.status, run.result, run.error) == (RunStatus.FAILED, None, {"type": "Boom"})
    assert (run.waiting_on, run.wake_at, run.wake_hint_at) == (None, None, None)
    assert run.updated_at == run.finished_at == T0
    assert WorkflowRun.objects.get(pk="parent").wake_hint_at == T0
    assert run.events.count() == 1
