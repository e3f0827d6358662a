"""The release rule (weft_django/ownership/claims/release.py, docs/ownership.md "The release
rule"): every path that lets go of a claim leaves it with no holder, and stamped
``released_at`` exactly when its run is still active, so the reclaim pass (and,
when the run is due, the fast tick) of any live worker takes it.

Issue 24: ``resume`` went through the revoke path, which cleared the stamp, so a
resumed run sat ``waiting`` with no owner until the 600 s full sweep.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import weft_django as weft
from weft_django.models import Claim, RunStatus, WorkflowRun
from weft_django.ownership.claims import release
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.claims.revoke import revoke_statement
from weft_django.ownership.clock import db_now
from weft_django.ownership.passes import scans, takeover
from weft_django.ownership.passes.outcomes import Outcome
from weft_django.ownership.passes.reclaim import reclaim_scan, take_due
from weft_django.runtime.engine import TurnOutcome
from weft_django.runtime.runs import expire_timed_out

from ..factories import EngineFactory, WorkflowEventFactory, WorkflowRunFactory

pytestmark = pytest.mark.django_db(transaction=True)

NAME = "shop.approve_order"  # the factory's workflow type


def state(run_id: str) -> tuple[str | None, int, bool]:
    """(holder, epoch, stamped) of ``run_id``'s claim."""
    holder, epoch, stamp = (
        Claim.objects.filter(pk=run_id).values_list("holder_id", "epoch", "released_at").get()
    )
    return holder, epoch, stamp is not None


def held_run(registry: ClaimRegistry, run_id: str, **traits: Any) -> str:
    """A run of ``NAME`` (waiting unless told otherwise) that ``registry`` holds."""
    traits.setdefault("waiting", True)
    run = WorkflowRunFactory(id=run_id, **traits)
    WorkflowEventFactory(run=run, seq=1)  # it has started: a resume makes it waiting
    assert registry.claim(run_id).outcome == Outcome.ACQUIRED
    return run_id


# -- the rule itself -------------------------------------------------------------------


def test_freed_is_no_holder_no_claim_time_and_a_stamp_only_while_the_run_is_active():
    active, ended = release.freed(ended=False), release.freed(ended=True)
    assert active.keys() == ended.keys() == {"holder_id", "claimed_at", "released_at"}
    assert active["holder_id"] is None and active["claimed_at"] is None
    assert active["released_at"] is not None and ended["released_at"] is None
    assert release.ENDED_SQL == "holder_id = NULL, claimed_at = NULL, released_at = NULL"


def test_release_held_is_conditional_on_holder_and_epoch(make_registry):
    owner = make_registry("owner")
    run_id = held_run(owner, "rh-1")
    assert not release.release_held("default", run_id, "someone-else", 1)
    assert not release.release_held("default", run_id, "owner", 2)
    assert state(run_id) == ("owner", 1, False)
    assert release.release_held("default", run_id, "owner", 1)
    assert state(run_id) == (None, 1, True)  # epoch unchanged, stamped
    assert not release.release_held("default", run_id, "owner", 1)  # not held any more


def test_unstamp_ended_leaves_a_claim_taken_meanwhile_alone(make_registry):
    owner = make_registry("owner")
    free, taken = held_run(owner, "us-1"), held_run(owner, "us-2")
    owner.release(free)
    Claim.objects.filter(pk=taken).update(released_at=db_now())  # a stale stamp, held
    assert release.unstamp_ended("default", [free, taken]) == 1
    assert state(free) == (None, 1, False) and state(taken) == ("owner", 1, True)
    assert release.unstamp_ended("default", []) == 0


def test_no_claim_write_outside_the_release_module_clears_a_holder_or_a_stamp():
    """One rule: the columns of a release are written in release.py only."""
    package = Path(release.__file__).resolve().parents[2]
    pattern = re.compile(
        r"released_at\s*=(?!=|\s*models\.)"  # not the field's definition
        r"|holder_id\s*=\s*NULL|\.update\([^)]*holder_id\s*=\s*None"
    )
    # The store-wide lease of mode "lease" is not a claim (GlobalLease.holder).
    allowed = {
        package / "ownership" / "claims" / "release.py",
        package / "ownership" / "leases" / "store.py",
    }
    found = [
        f"{path.relative_to(package)}:{line}"
        for path in sorted(package.rglob("*.py"))
        if path not in allowed and "migrations" not in path.parts
        for line, text in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(text)
    ]
    assert found == []


# -- every release path ---------------------------------------------------------------


def test_an_owners_release_of_an_active_run_stamps_it_and_of_an_ended_one_does_not(
    make_registry,
):
    owner = make_registry("owner")
    parked, ended = held_run(owner, "or-1"), held_run(owner, "or-2")
    owner.release(parked)
    owner.release(ended, ended=True)
    assert state(parked) == (None, 1, True)
    assert state(ended) == (None, 1, False)


def test_a_graceful_stop_stamps_every_claim_it_held(make_registry):
    owner, other = make_registry("owner"), make_registry("other")
    mine = [held_run(owner, f"gs-{n}") for n in range(3)]
    theirs = held_run(other, "gs-other")
    assert owner.release_all() == 3
    assert [state(run_id) for run_id in mine] == [(None, 1, True)] * 3
    assert state(theirs) == ("other", 1, False)


def test_a_claim_won_while_disposing_is_released_stamped(make_registry):
    owner = make_registry("owner")
    WorkflowRunFactory(id="dp-1", waiting=True, claim=True)
    batch = takeover.Batch(won={"dp-1": 2}, due={"dp-1": True})
    Claim.objects.filter(pk="dp-1").update(holder_id="owner", epoch=2, claimed_at=db_now())
    owner.disposing = True
    settled = takeover.settle(owner, batch, takeover=False)
    assert settled.released == ["dp-1"]
    assert state("dp-1") == (None, 2, True)


def test_a_turn_that_finds_its_run_ended_or_gone_releases_it_unstamped(make_engine):
    engine = make_engine()
    for run_id, traits in (("te-1", {"completed": True}), ("te-2", {"suspended": True})):
        WorkflowRunFactory(id=run_id, **traits)
        Claim.objects.create(workflow_id=run_id, epoch=1)
        assert engine.acquire(run_id).outcome == Outcome.ACQUIRED
        assert engine.drive(run_id) == TurnOutcome.TERMINAL
        assert state(run_id) == (None, 2, False)
    WorkflowRunFactory(id="te-3", waiting=True)
    assert engine.acquire("te-3").outcome == Outcome.ACQUIRED
    WorkflowRun.objects.filter(pk="te-3").delete()
    assert engine.drive("te-3") == TurnOutcome.MISSING
    assert state("te-3") == (None, 1, False)


@pytest.mark.parametrize(
    "transition", [weft.cancel, weft.suspend, weft.purge], ids=["cancel", "suspend", "purge"]
)
def test_an_operator_transition_that_ends_the_run_revokes_it_unstamped(make_registry, transition):
    owner = make_registry("owner")
    run_id = held_run(owner, "op-1")
    Claim.objects.filter(pk=run_id).update(released_at=db_now())  # a stale stamp, held
    transition(run_id)
    assert state(run_id) == (None, 2, False)


def test_an_execution_timeout_revokes_the_run_unstamped(make_registry):
    owner = make_registry("owner")
    run_id = held_run(owner, "to-1", timeout_at=db_now() - timedelta(seconds=1))
    assert expire_timed_out() == [run_id]
    assert state(run_id) == (None, 2, False)


def test_resume_releases_the_claim_stamped(make_registry):
    """Issue 24: the resumed run's claim must be in the released index."""
    owner = make_registry("owner")
    run_id = held_run(owner, "rs-1")
    weft.suspend(run_id)
    assert state(run_id) == (None, 2, False)
    weft.resume(run_id)
    assert WorkflowRun.objects.get(pk=run_id).status == RunStatus.WAITING
    assert state(run_id) == (None, 3, True)


def test_resume_of_a_run_that_never_had_a_claim_row_creates_it_stamped():
    WorkflowRunFactory(id="rs-2", suspended=True)  # no claim row
    weft.resume("rs-2")
    assert state("rs-2") == (None, 1, True)


def test_revoke_statement_stamps_only_what_stays_active():
    WorkflowRunFactory(id="rv-1", waiting=True, claim=True)
    assert revoke_statement("default", "rv-1") == 2
    assert state("rv-1") == (None, 2, False)
    assert revoke_statement("default", "rv-1", ended=False) == 3
    assert state("rv-1") == (None, 3, True)
    assert revoke_statement("default", "rv-new", ended=False) == 1
    assert state("rv-new") == (None, 1, True)


# -- who takes a released run, and when -----------------------------------------------


def test_a_resumed_run_is_taken_by_the_next_reclaim_pass_not_the_full_sweep(make_registry):
    owner, rival = make_registry("owner"), make_registry("rival")
    run_id = held_run(owner, "rp-1")

    def scan(registry: ClaimRegistry) -> dict[str, Outcome]:
        return reclaim_scan(registry, names=[NAME], drive=lambda _id: True, budget=60.0).outcomes

    assert scan(rival) == {}  # the first pass: the full sweep, done
    weft.suspend(run_id)
    weft.resume(run_id)
    expected = {run_id: Outcome.RECLAIMED}
    assert scan(rival) == expected  # off the released index (MySQL: its full sweep)
    assert state(run_id) == ("rival", 4, True)  # held: out of the partial index


def test_the_tick_takes_released_runs_that_are_due(make_engine):
    engine = make_engine()
    other, expired = EngineFactory(), EngineFactory(expired=True)
    now = db_now()
    past = now - timedelta(seconds=1)
    WorkflowRunFactory(id="mine", waiting=True, wake_hint_at=past, claim=True)
    Claim.objects.filter(pk="mine").update(holder_id=engine.engine_id, claimed_at=now)
    engine.ownership.claims._remember("mine", 1)
    free = {
        "hinted": {"waiting": True, "wake_hint_at": past},
        "timer": {"waiting": True, "wake_at": past},
        "running": {"running": True, "wake_hint_at": past},
    }
    for run_id, traits in free.items():
        WorkflowRunFactory(id=run_id, claim=True, **traits)
    WorkflowRunFactory(id="not-due", waiting=True, claim=True)
    WorkflowRunFactory(id="later", waiting=True, wake_at=now + timedelta(hours=1), claim=True)
    WorkflowRunFactory(id="others", waiting=True, wake_hint_at=past, claim=other)
    WorkflowRunFactory(id="expired", waiting=True, wake_hint_at=past, claim=expired)
    WorkflowRunFactory(id="pending", wake_hint_at=past, claim=True)  # the intake's
    WorkflowRunFactory(id="cancelled", status=RunStatus.CANCELLED, wake_hint_at=past, claim=True)
    WorkflowRunFactory(
        id="elsewhere", workflow_name="t.other", waiting=True, wake_hint_at=past, claim=True
    )

    found = scans.woken(engine.engine_id, now, [NAME])
    assert found.held == ["mine"] and sorted(found.free) == sorted(free)
    due = engine.ownership.due_runs(now, [NAME], limit=100)
    assert due[0] == "mine" and sorted(due[1:]) == sorted(free)
    for run_id in free:
        assert state(run_id)[:2] == (engine.engine_id, 2)
        assert engine.ownership.check_wake(run_id, "tick")
    for run_id in ("not-due", "later", "pending", "cancelled", "elsewhere"):
        assert state(run_id)[0] is None
    assert state("others")[0] == other.id and state("expired")[0] == expired.id


def test_the_tick_takes_nothing_while_disposing_or_in_cooldown(make_registry):
    owner = make_registry("owner")
    now = db_now()
    for run_id in ("cd-1", "cd-2"):
        WorkflowRunFactory(id=run_id, waiting=True, wake_hint_at=now, claim=True)
    owner.cooldown.record_loss("cd-1")
    assert take_due(owner, ["cd-1", "cd-2"], [NAME], now) == ["cd-2"]
    owner.disposing = True
    Claim.objects.filter(pk="cd-2").update(holder_id=None, claimed_at=None)
    assert take_due(owner, ["cd-2"], [NAME], now) == []
    assert state("cd-1")[0] is None and state("cd-2")[0] is None


def test_the_tick_costs_no_statement_more_when_nothing_released_is_due(make_engine):
    engine = make_engine()
    now = db_now()
    WorkflowRunFactory(id="held", waiting=True, wake_hint_at=now, claim=True)
    Claim.objects.filter(pk="held").update(holder_id=engine.engine_id, claimed_at=now)
    WorkflowRunFactory(id="others", waiting=True, wake_hint_at=now, claim=EngineFactory())
    with CaptureQueriesContext(connection) as queries:
        assert engine.ownership.due_runs(now, [NAME], limit=100) == ["held"]
    assert len(queries.captured_queries) == 1  # the two wake indexes, in one statement


def test_a_run_released_by_a_tick_race_is_taken_once(make_engine):
    first, second = make_engine(), make_engine()
    now = db_now()
    WorkflowRunFactory(id="race-1", waiting=True, wake_hint_at=now, claim=True)
    for engine in (first, second):
        assert scans.woken(engine.engine_id, now, [NAME]).free == ["race-1"]
    assert take_due(first.ownership.claims, ["race-1"], [NAME], now) == ["race-1"]
    assert take_due(second.ownership.claims, ["race-1"], [NAME], now) == []
    assert state("race-1")[:2] == (first.engine_id, 2)
