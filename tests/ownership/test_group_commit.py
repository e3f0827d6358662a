"""Group commit: concurrent turns' checkpoints and parks in one fenced statement,
each run still fenced by its own claim and epoch."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError

from weft_django.models import Claim, WorkflowEvent, WorkflowRun
from weft_django.ownership.clock import db_now
from weft_django.ownership.writes import group as group_commit
from weft_django.ownership.writes.group import GroupCommit
from weft_django.ownership.writes.single import FencedWrite, fenced_write_many

from ..factories import EngineFactory, WorkflowRunFactory

WAITING_ON = json.dumps({"kind": "signal", "name": "go"})


def _request(run_id: str, epoch: int = 1, **values: Any) -> FencedWrite:
    """A park, unless ``waiting_on_json=None`` (a checkpoint)."""
    values.setdefault("rows", [])
    values.setdefault("waiting_on_json", WAITING_ON)
    return FencedWrite(run_id, epoch, **values)


def _event(run_id: str, seq: int, engine_id: str) -> tuple[Any, ...]:
    return (run_id, seq, "step", "s", json.dumps(seq), None, engine_id, 1, db_now())


@pytest.mark.postgres
def test_each_run_of_a_group_is_parked_only_under_its_own_claim(db: None) -> None:
    mine, other = EngineFactory(), EngineFactory()
    hint = db_now() - timedelta(seconds=1)
    for run_id in ("held", "hinted", "rehinted"):
        WorkflowRunFactory(id=run_id, running=True, claim=mine)
    WorkflowRunFactory(id="old-epoch", running=True, claim=mine)
    WorkflowRunFactory(id="others", running=True, claim=other)
    WorkflowRun.objects.filter(pk__in=["hinted", "rehinted"]).update(wake_hint_at=hint)
    epochs = dict(Claim.objects.values_list("workflow_id", "epoch"))
    requests = [
        _request("held", epochs["held"], rows=[_event("held", 1, mine.id)], wake_at=hint),
        _request("hinted", epochs["hinted"], hint_seen=hint),
        # A hint left during the turn (newer than the one it answered) survives.
        _request("rehinted", epochs["rehinted"], hint_seen=hint - timedelta(seconds=1)),
        _request("old-epoch", epochs["old-epoch"] - 1, rows=[_event("old-epoch", 1, mine.id)]),
        _request("others", epochs["others"], rows=[_event("others", 1, mine.id)]),
    ]

    parked = fenced_write_many("default", engine_id=mine.id, requests=requests)

    assert parked == {"held", "hinted", "rehinted"}
    runs = {run.pk: run for run in WorkflowRun.objects.all()}
    assert {pk for pk, run in runs.items() if run.status == "waiting"} == parked
    assert runs["held"].waiting_on == {"kind": "signal", "name": "go"}
    assert runs["held"].wake_at == hint
    assert runs["hinted"].wake_hint_at is None
    assert runs["rehinted"].wake_hint_at == hint
    assert list(WorkflowEvent.objects.values_list("run_id", flat=True)) == ["held"]


@pytest.mark.postgres
def test_checkpoints_and_parks_share_a_group(db: None) -> None:
    mine = EngineFactory()
    WorkflowRunFactory(id="parks", running=True, claim=mine)
    WorkflowRunFactory(id="steps", running=True, claim=mine)
    WorkflowRunFactory(id="starts", claim=mine)  # pending: its first checkpoint marks it running
    WorkflowRunFactory(id="deposed", claim=mine)
    deadline = db_now() + timedelta(minutes=5)
    epochs = dict(Claim.objects.values_list("workflow_id", "epoch"))
    requests = [
        _request("parks", epochs["parks"], rows=[_event("parks", 1, mine.id)]),
        _request(
            "steps", epochs["steps"], waiting_on_json=None, rows=[_event("steps", 1, mine.id)]
        ),
        _request(
            "starts",
            epochs["starts"],
            waiting_on_json=None,
            rows=[_event("starts", 0, mine.id), _event("starts", 1, mine.id)],
            wake_at=deadline,
            mark_running=True,
        ),
        _request(
            "deposed",
            epochs["deposed"] + 1,
            waiting_on_json=None,
            rows=[_event("deposed", 0, mine.id)],
            mark_running=True,
        ),
    ]

    written = fenced_write_many("default", engine_id=mine.id, requests=requests)

    assert written == {"parks", "steps", "starts"}
    runs = {run.pk: run for run in WorkflowRun.objects.all()}
    assert {pk: run.status for pk, run in runs.items()} == {
        "parks": "waiting",
        "steps": "running",
        "starts": "running",
        "deposed": "pending",
    }
    assert runs["starts"].wake_at == deadline and runs["starts"].started_at is not None
    events = sorted(WorkflowEvent.objects.values_list("run_id", "seq"))
    assert events == [("parks", 1), ("starts", 0), ("starts", 1), ("steps", 1)]


@pytest.mark.postgres
def test_an_empty_engine_id_holds_no_unheld_claim(db: None) -> None:
    WorkflowRunFactory(id="unheld-park", running=True, claim=True)
    WorkflowRunFactory(id="unheld-step", claim=True)
    requests = [
        _request("unheld-park", rows=[_event("unheld-park", 1, "")]),
        _request("unheld-step", waiting_on_json=None, mark_running=True, rows=[]),
    ]

    assert fenced_write_many("default", engine_id="", requests=requests) == set()

    statuses = dict(WorkflowRun.objects.values_list("pk", "status"))
    assert statuses == {"unheld-park": "running", "unheld-step": "pending"}
    assert not WorkflowEvent.objects.exists()


class FakeWrites:
    """Stands in for the group statement: slow enough that parks pile up."""

    def __init__(self, *, deposed: set[str] = frozenset(), failing: str = "") -> None:  # type: ignore[assignment]
        self.deposed = deposed
        self.failing = failing
        self.groups: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self, using: str, *, engine_id: str, requests: list[FencedWrite]):
        ids = [request.workflow_id for request in requests]
        with self.lock:
            self.groups.append(ids)
        time.sleep(0.002)
        if self.failing in ids:
            raise DatabaseError("the group statement failed")
        return {run_id for run_id in ids if run_id not in self.deposed}


def _park_from_threads(parks: GroupCommit, ids: list[list[str]]) -> dict[str, Any]:
    outcomes: dict[str, Any] = {}

    def turns(mine: list[str]) -> None:
        for run_id in mine:
            try:
                outcomes[run_id] = parks.write(_request(run_id))
            except DatabaseError as exc:
                outcomes[run_id] = exc

    threads = [threading.Thread(target=turns, args=(mine,)) for mine in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads), "a park never returned"
    return outcomes


def test_concurrent_parks_are_grouped_and_each_gets_its_own_outcome(monkeypatch) -> None:
    writes = FakeWrites(deposed={"t3-7", "t9-0"})
    monkeypatch.setattr(group_commit, "fenced_write_many", writes)
    parks = GroupCommit("default", "engine-1", max_group=8)
    ids = [[f"t{t}-{n}" for n in range(40)] for t in range(16)]

    outcomes = _park_from_threads(parks, ids)

    everything = [run_id for mine in ids for run_id in mine]
    assert outcomes == {run_id: run_id not in {"t3-7", "t9-0"} for run_id in everything}
    written = [run_id for group in writes.groups for run_id in group]
    assert sorted(written) == sorted(everything)  # each park written once
    assert max(len(group) for group in writes.groups) <= 8
    assert len(writes.groups) < len(everything) / 2  # grouped while one was written
    assert (parks.groups, parks.writes) == (len(writes.groups), len(everything))


def test_a_park_alone_is_written_at_once(monkeypatch) -> None:
    writes = FakeWrites()
    monkeypatch.setattr(group_commit, "fenced_write_many", writes)
    parks = GroupCommit("default", "engine-1")
    assert parks.write(_request("solo")) is True
    assert parks.write(_request("solo-2")) is True
    assert writes.groups == [["solo"], ["solo-2"]]


def test_a_failed_group_fails_each_of_its_parks_and_no_other(monkeypatch) -> None:
    writes = FakeWrites(failing="t0-5")
    monkeypatch.setattr(group_commit, "fenced_write_many", writes)
    parks = GroupCommit("default", "engine-1", max_group=4)

    outcomes = _park_from_threads(parks, [[f"t{t}-{n}" for n in range(10)] for t in range(6)])

    failed_group = next(group for group in writes.groups if "t0-5" in group)
    failed = {run_id for run_id, outcome in outcomes.items() if outcome is not True}
    assert failed == set(failed_group)
    assert all(isinstance(outcomes[run_id], DatabaseError) for run_id in failed)
    # The next park still goes through: the failure handed the lead on.
    assert parks.write(_request("after")) is True


def test_one_group_is_written_at_a_time(monkeypatch) -> None:
    active, most = [0], [0]
    lock = threading.Lock()

    def writes(using: str, *, engine_id: str, requests: list[FencedWrite]):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.005)
        with lock:
            active[0] -= 1
        return {request.workflow_id for request in requests}

    monkeypatch.setattr(group_commit, "fenced_write_many", writes)
    parks = GroupCommit("default", "engine-1")
    ids = [[f"t{t}-{n}" for n in range(20)] for t in range(8)]
    outcomes = _park_from_threads(parks, ids)
    assert outcomes == {run_id: True for mine in ids for run_id in mine}
    assert most[0] == 1


@pytest.mark.postgres
def test_a_write_stamped_by_an_engine_off_the_database_clock_carries_its_own_time(
    db: None,
) -> None:
    mine = EngineFactory()
    WorkflowRunFactory(id="offset", claim=mine)  # pending: its park also sets started_at
    WorkflowRunFactory(id="db-clock", claim=mine)
    later = db_now() + timedelta(days=2)  # a test driver's advanced clock
    epochs = dict(Claim.objects.values_list("workflow_id", "epoch"))
    requests = [
        _request("offset", epochs["offset"], stamped_at=later),
        _request("db-clock", epochs["db-clock"]),
    ]
    assert fenced_write_many("default", engine_id=mine.id, requests=requests) == {
        "offset",
        "db-clock",
    }
    runs = {run.pk: run for run in WorkflowRun.objects.all()}
    assert runs["offset"].updated_at == later and runs["offset"].started_at == later
    assert runs["db-clock"].updated_at < later
