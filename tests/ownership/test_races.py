"""Real races on PostgreSQL and MariaDB/MySQL: threads and OS processes on
separate connections, and fenced writes held up by (or holding up) real row locks.

Every engine here uses the database clock (no FakeClock), and leases are put in
the past explicitly in the database. Each test thread closes its connection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction

from tests.concurrency import in_thread, run_concurrently, wait_until_blocked_on_a_lock
from tests.integration.helpers import database_url
from weft_django.conf import get_settings
from weft_django.exceptions import EngineDeposedError
from weft_django.models import Claim, Engine, RunStatus, WorkflowEvent, WorkflowRun
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.claims.results import Acquired, LostRace, NotExpired
from weft_django.ownership.clock import db_now
from weft_django.ownership.leases.engines import register_engine
from weft_django.ownership.writes.fence import fenced
from weft_django.ownership.writes.requests import Checkpoint, Fence
from weft_django.ownership.writes.single import fenced_insert

pytestmark = [pytest.mark.postgres, pytest.mark.mysql, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
THREADS = 8
PROCESSES = 4


@pytest.fixture
def engines(weft_settings) -> Callable[[int, str], list[str]]:
    def make(count: int, prefix: str = "engine") -> list[str]:
        config = get_settings()
        return [
            register_engine(config, engine_id=f"{prefix}-{n}", kind="test").id for n in range(count)
        ]

    return make


def expire_lease(engine_id: str) -> None:
    """Put the engine's lease a minute in the past on the database clock."""
    Engine.objects.filter(id=engine_id).update(lease_expires_at=db_now() - timedelta(seconds=60))


def expired_owner(engines: Callable[..., list[str]]) -> tuple[str, str]:
    """Two engines; the first holds run "wf" at epoch 1 and its lease has expired."""
    owner_id, rival_id = engines(2)
    WorkflowRun.objects.create(id="wf", workflow_name="t.wf", status=RunStatus.RUNNING)
    assert ClaimRegistry(owner_id).acquire("wf") == Acquired("wf", 1)
    expire_lease(owner_id)
    return owner_id, rival_id


def takeover_held_open(
    rival_id: str, owner_id: str, taken: threading.Event, commit: threading.Event
) -> Any:
    """Take "wf" over in a transaction kept open until ``commit`` is set."""
    with transaction.atomic():
        result = ClaimRegistry(rival_id).takeover("wf", holder_id=owner_id, epoch=1)
        taken.set()
        assert commit.wait(10)
    return result


# -- OS processes ----------------------------------------------------------------

CHILD = """
import json, sys
import django
django.setup()
from django.db import connection
from weft_django.ownership.claims.registry import ClaimRegistry
engine_id, operation, workflow_id = sys.argv[1:4]
registry = ClaimRegistry(engine_id)
connection.ensure_connection()
print("ready", flush=True)
sys.stdin.readline()
result = getattr(registry, operation)(workflow_id)
print(json.dumps({
    "outcome": result.outcome,
    "epoch": getattr(result, "epoch", None),
    "takeover": getattr(result, "takeover", False),
    "held_by": getattr(result, "held_by", None),
}), flush=True)
connection.close()
"""


def race_processes(engine_ids: list[str], operation: str, workflow_id: str) -> list[dict]:
    """One OS process per engine, all released at once, each calling
    ``ClaimRegistry(engine).<operation>(workflow_id)``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "DATABASE_URL": database_url(connection.settings_dict),  # the test database
        "WEFT_OWNERSHIP": "workflow-lease",
        "WEFT_CLAIM_TTL": "30",
        "WEFT_CLAIM_RENEW_INTERVAL": "5",
    }
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, engine_id, operation, workflow_id],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for engine_id in engine_ids
    ]
    try:
        for child in children:
            line = child.stdout.readline()
            assert line.strip() == "ready", child.stderr.read()
        for child in children:  # the start line
            child.stdin.write("go\n")
            child.stdin.flush()
        outputs = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


# -- acquire ---------------------------------------------------------------------


@pytest.mark.parametrize("start_epoch", [None, 5], ids=["new-id", "released-at-5"])
def test_threads_acquiring_one_workflow_have_exactly_one_winner(engines, start_epoch):
    ids = engines(THREADS)
    for round_ in range(3):
        workflow_id = f"wf-{round_}"
        if start_epoch is not None:
            Claim.objects.create(workflow_id=workflow_id, epoch=start_epoch)
        registries = [ClaimRegistry(engine_id) for engine_id in ids]
        results = run_concurrently(*[lambda r=r, w=workflow_id: r.acquire(w) for r in registries])
        winners = [r for r in results if isinstance(r, Acquired)]
        expected_epoch = (start_epoch or 0) + 1
        assert len(winners) == 1, results
        assert winners[0].epoch == expected_epoch
        winner_id = ids[results.index(winners[0])]
        assert all(r == LostRace(workflow_id, winner_id) for r in results if r is not winners[0]), (
            results
        )
        claim = Claim.objects.get(workflow_id=workflow_id)
        assert (claim.epoch, claim.holder_id) == (expected_epoch, winner_id)
        assert [r.held for r in registries].count({workflow_id: expected_epoch}) == 1


def test_processes_acquiring_one_workflow_have_exactly_one_winner(engines):
    ids = engines(PROCESSES, "proc")
    results = race_processes(ids, "acquire", "wf-proc")
    winners = [r for r in results if r["outcome"] == "acquired"]
    assert len(winners) == 1, results
    assert winners[0]["epoch"] == 1
    winner_id = ids[results.index(winners[0])]
    assert [r["held_by"] for r in results if r is not winners[0]] == [winner_id] * (PROCESSES - 1)
    claim = Claim.objects.get(workflow_id="wf-proc")
    assert (claim.epoch, claim.holder_id) == (1, winner_id)


# -- takeover of an expired holder ---------------------------------------------------


def held_by_expired(engine_id: str, workflow_id: str, epoch: int) -> None:
    Claim.objects.create(
        workflow_id=workflow_id, epoch=epoch, holder_id=engine_id, claimed_at=db_now()
    )
    expire_lease(engine_id)


def check_single_takeover(results, outcome, epoch_of, ids, workflow_id, old_id, epoch) -> None:
    winners = [r for r in results if outcome(r) == "acquired"]
    assert len(winners) == 1, results
    assert epoch_of(winners[0]) == (epoch + 1, True)
    winner_id = ids[results.index(winners[0])]
    # losers either lost the conditional write or, reading after it, saw a live holder
    assert all(outcome(r) in ("lost_race", "not_expired") for r in results if r is not winners[0])
    claim = Claim.objects.get(workflow_id=workflow_id)
    assert (claim.epoch, claim.holder_id) == (epoch + 1, winner_id)
    # the losers' bumps of the old holder's counter were rolled back
    assert Engine.objects.get(id=old_id).revocations == 1


def test_threads_taking_over_an_expired_holder_have_exactly_one_winner(engines):
    (old_id,) = engines(1, "old")
    ids = engines(THREADS)
    held_by_expired(old_id, "wf", 3)
    registries = [ClaimRegistry(engine_id) for engine_id in ids]
    results = run_concurrently(*[lambda r=r: r.claim("wf") for r in registries])
    check_single_takeover(
        results,
        lambda r: r.outcome,
        lambda r: (r.epoch, r.takeover),
        ids,
        "wf",
        old_id,
        3,
    )
    for result in results:
        if isinstance(result, (LostRace, NotExpired)):
            assert result.held_by in (old_id, *ids)


def test_threads_taking_over_with_the_same_read_have_exactly_one_winner(engines):
    """All racers judged the same read; only the SQL conditions arbitrate."""
    (old_id,) = engines(1, "old")
    ids = engines(THREADS)
    held_by_expired(old_id, "wf", 3)
    registries = [ClaimRegistry(engine_id) for engine_id in ids]
    results = run_concurrently(
        *[lambda r=r: r.takeover("wf", holder_id=old_id, epoch=3) for r in registries]
    )
    check_single_takeover(
        results, lambda r: r.outcome, lambda r: (r.epoch, r.takeover), ids, "wf", old_id, 3
    )
    assert all(isinstance(r, LostRace) for r in results if not isinstance(r, Acquired))


def test_processes_taking_over_an_expired_holder_have_exactly_one_winner(engines):
    (old_id,) = engines(1, "old")
    ids = engines(PROCESSES, "proc")
    held_by_expired(old_id, "wf-proc", 7)
    results = race_processes(ids, "claim", "wf-proc")
    check_single_takeover(
        results,
        lambda r: r["outcome"],
        lambda r: (r["epoch"], r["takeover"]),
        ids,
        "wf-proc",
        old_id,
        7,
    )


# -- renew racing takeover ----------------------------------------------------------


def test_renew_racing_takeover_never_deposes_an_engine_that_renewed_first(engines):
    """The owner's lease has expired and a rival has judged it so; the owner renews
    while the rival writes. Either the renewal lands first and the takeover must
    fail (NotExpired), or the takeover lands first and that very renewal must
    report the claim lost. Never both owners, never a silent deposition."""
    owner_id, rival_id = engines(2)
    owner = ClaimRegistry(owner_id)
    rival = ClaimRegistry(rival_id)
    for round_ in range(25):
        workflow_id = f"wf-{round_}"
        assert owner.acquire(workflow_id) == Acquired(workflow_id, 1)
        expire_lease(owner_id)
        state = rival.read(workflow_id)
        assert rival.timing.is_expired(state.expires_at, rival.now())
        renewal, takeover = run_concurrently(
            owner.renew,
            lambda w=workflow_id: rival.takeover(w, holder_id=owner_id, epoch=1),
        )
        lost = [item.workflow_id for item in renewal.lost]
        claim = Claim.objects.get(workflow_id=workflow_id)
        if isinstance(takeover, Acquired):
            assert takeover.epoch == 2
            assert lost == [workflow_id]  # reported by the racing renewal itself
            assert (claim.epoch, claim.holder_id) == (2, rival_id)
            assert workflow_id not in owner.held
            rival.release(workflow_id)
        else:
            assert isinstance(takeover, NotExpired), takeover
            assert lost == []
            assert (claim.epoch, claim.holder_id) == (1, owner_id)
            assert owner.held[workflow_id] == 1
            owner.release(workflow_id)
        assert renewal.engine_renewed
        # at most one engine believes it holds the claim
        assert (workflow_id in owner.held) + (workflow_id in rival.held) <= 1
        assert owner.renew().lost == []


# -- fenced() against a concurrent takeover ---------------------------------------------


def test_a_takeover_waits_for_an_open_fenced_write_to_commit(engines):
    owner_id, rival_id = expired_owner(engines)
    inside, finish = threading.Event(), threading.Event()

    def owner_turn() -> None:
        with fenced(Fence("wf", owner_id, 1)):
            WorkflowEvent.objects.create(run_id="wf", seq=1, kind="step", epoch=1)
            inside.set()
            assert finish.wait(10)

    owner_thread, owner_box = in_thread(owner_turn)
    assert inside.wait(10)
    rival_thread, rival_box = in_thread(
        lambda: ClaimRegistry(rival_id).takeover("wf", holder_id=owner_id, epoch=1)
    )
    wait_until_blocked_on_a_lock(rival_box)  # by the fenced transaction's row lock
    assert rival_thread.is_alive()
    finish.set()
    owner_thread.join(10)
    rival_thread.join(10)
    assert "error" not in owner_box and "error" not in rival_box, (owner_box, rival_box)
    assert rival_box["result"] == Acquired("wf", 2, takeover=True)
    # the owner's write committed while it still owned the run; its next one is refused
    assert list(WorkflowEvent.objects.values_list("seq", "epoch")) == [(1, 1)]
    with (
        pytest.raises(EngineDeposedError),
        fenced(Fence("wf", owner_id, 1)),
    ):
        WorkflowEvent.objects.create(run_id="wf", seq=2, kind="step", epoch=1)
    assert WorkflowEvent.objects.count() == 1


def test_a_fenced_write_waiting_on_an_uncommitted_takeover_is_refused(engines):
    owner_id, rival_id = expired_owner(engines)
    taken, commit = threading.Event(), threading.Event()

    def rival_takeover() -> Any:
        return takeover_held_open(rival_id, owner_id, taken, commit)

    def owner_write() -> None:
        with fenced(Fence("wf", owner_id, 1)):
            WorkflowEvent.objects.create(run_id="wf", seq=1, kind="step", epoch=1)

    rival_thread, rival_box = in_thread(rival_takeover)
    assert taken.wait(10)
    owner_thread, owner_box = in_thread(owner_write)
    wait_until_blocked_on_a_lock(owner_box)  # the fence check waits for the takeover
    commit.set()
    rival_thread.join(10)
    owner_thread.join(10)
    assert rival_box.get("result") == Acquired("wf", 2, takeover=True), rival_box
    assert isinstance(owner_box.get("error"), EngineDeposedError), owner_box
    assert not WorkflowEvent.objects.exists()


def _event_row(seq: int, epoch: int, owner_id: str) -> tuple[Any, ...]:
    return ("wf", seq, "step", "s", json.dumps(seq), None, owner_id, epoch, db_now())


def test_a_one_statement_fenced_insert_waiting_on_an_uncommitted_takeover_inserts_nothing(
    engines,
):
    owner_id, rival_id = expired_owner(engines)
    taken, commit = threading.Event(), threading.Event()

    def rival_takeover() -> Any:
        return takeover_held_open(rival_id, owner_id, taken, commit)

    def owner_insert() -> Any:
        return fenced_insert(
            "default", Fence("wf", owner_id, 1), Checkpoint([_event_row(1, 1, owner_id)])
        )

    rival_thread, rival_box = in_thread(rival_takeover)
    assert taken.wait(10)
    owner_thread, owner_box = in_thread(owner_insert)
    wait_until_blocked_on_a_lock(owner_box)  # the locking read waits for the takeover
    commit.set()
    rival_thread.join(10)
    owner_thread.join(10)
    assert rival_box.get("result") == Acquired("wf", 2, takeover=True), rival_box
    assert owner_box.get("result") is False, owner_box
    assert not WorkflowEvent.objects.exists()


def test_a_one_statement_fenced_insert_holds_off_a_takeover_until_it_commits(engines):
    owner_id, rival_id = expired_owner(engines)
    inside, finish = threading.Event(), threading.Event()

    def owner_turn() -> Any:
        with transaction.atomic():
            inserted = fenced_insert(
                "default",
                Fence("wf", owner_id, 1),
                Checkpoint([_event_row(1, 1, owner_id), _event_row(2, 1, owner_id)]),
            )
            inside.set()
            assert finish.wait(10)
        return inserted

    owner_thread, owner_box = in_thread(owner_turn)
    assert inside.wait(10)
    rival_thread, rival_box = in_thread(
        lambda: ClaimRegistry(rival_id).takeover("wf", holder_id=owner_id, epoch=1)
    )
    wait_until_blocked_on_a_lock(rival_box)
    finish.set()
    owner_thread.join(10)
    rival_thread.join(10)
    assert owner_box.get("result") is True, owner_box
    assert rival_box.get("result") == Acquired("wf", 2, takeover=True), rival_box
    assert list(WorkflowEvent.objects.order_by("seq").values_list("seq", "epoch")) == [
        (1, 1),
        (2, 1),
    ]
