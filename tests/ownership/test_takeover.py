"""The batched takeover of the reclaim scan (docs/ownership.md, "Takeover at scale"):
expired holders' claims and ownerless runs are taken in batches, one conditional
UPDATE per batch, with the one-run rules (epoch + 1, the old holder fenced)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from weft_django.models import Claim, Engine, RunStatus, WorkflowRun
from weft_django.ownership.claims.registry import ClaimRegistry, release_statement
from weft_django.ownership.claims.revoke import revoke_statement
from weft_django.ownership.passes import takeover
from weft_django.ownership.passes.outcomes import Outcome
from weft_django.ownership.passes.reclaim import reclaim_scan

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ["t.wf"]


def parked(
    prefix: str, count: int, *, holder: str | None, epoch: int = 1, status: str = "waiting"
) -> list[str]:
    """``count`` runs of ``t.wf`` in ``status`` with claims held by ``holder`` (None:
    released, as a graceful shutdown leaves them)."""
    ids = [f"{prefix}-{n:06d}" for n in range(count)]
    WorkflowRun.objects.bulk_create(
        [
            WorkflowRun(id=run_id, workflow_name="t.wf", status=status, waiting_on={"kind": "x"})
            for run_id in ids
        ],
        batch_size=2000,
    )
    stamp = Engine.objects.first().started_at if holder else None
    released = timezone.now() if holder is None else None  # let go of before it ended
    Claim.objects.bulk_create(
        [
            Claim(
                workflow_id=i, epoch=epoch, holder_id=holder, claimed_at=stamp, released_at=released
            )
            for i in ids
        ],
        batch_size=2000,
    )
    return ids


def expire(engine_id: str, clock) -> None:
    Engine.objects.filter(id=engine_id).update(lease_expires_at=clock() - timedelta(seconds=120))


class Driven(list):
    def __call__(self, run_id: str) -> bool:
        self.append(run_id)
        return True


def scan(registry: ClaimRegistry, **kwargs) -> tuple[dict[str, Outcome], Driven]:
    driven = Driven()
    kwargs.setdefault("budget", 60.0)
    result = reclaim_scan(registry, names=NAMES, drive=driven, **kwargs)
    return result.outcomes, driven


def test_expired_holder_claims_are_taken_in_batches(make_registry, clock):
    owner, rival = make_registry("owner"), make_registry("rival")
    ids = parked("p", 2500, holder="owner")
    for run_id in ids:
        owner._remember(run_id, 1)
    expire("owner", clock)

    outcomes, driven = scan(rival, limit=1000)

    assert outcomes == dict.fromkeys(ids, Outcome.RECLAIMED)
    assert set(Claim.objects.values_list("holder_id", "epoch")) == {("rival", 2)}
    assert rival.held == dict.fromkeys(ids, 2)
    assert driven == []  # parked with nothing due: held, no turn
    # The old holder's revocations moved once per batch (3 batches), so its next
    # renewal finds every lost claim.
    assert Engine.objects.get(id="owner").revocations == 3
    clock.advance(0.1)
    assert {lost.workflow_id for lost in owner.renew().lost} == set(ids)


def test_ownerless_runs_are_acquired_in_batches(make_registry):
    rival = make_registry("rival")
    ids = parked("o", 1500, holder=None, epoch=4)
    no_row = WorkflowRun.objects.create(id="no-claim", workflow_name="t.wf", status="running")

    outcomes, driven = scan(rival, limit=1000)

    assert outcomes == dict.fromkeys([no_row.id, *ids], Outcome.RECLAIMED)
    assert set(Claim.objects.filter(workflow_id__in=ids).values_list("holder_id", "epoch")) == {
        ("rival", 5)
    }
    assert Claim.objects.get(workflow_id="no-claim").epoch == 1  # one-run fallback
    assert driven == ["no-claim"]  # left running: it needs a turn


def test_only_runs_with_something_to_do_are_driven(make_registry, clock):
    rival = make_registry("rival")
    make_registry("owner")
    hinted, timer, parked_only, pending, running = (
        parked(name, 1, holder="owner")[0]
        for name in ("hinted", "timer", "parked", "pending", "running")
    )
    WorkflowRun.objects.filter(pk=hinted).update(wake_hint_at=clock())
    WorkflowRun.objects.filter(pk=timer).update(wake_at=clock() - timedelta(seconds=1))
    WorkflowRun.objects.filter(pk=pending).update(status=RunStatus.PENDING)
    WorkflowRun.objects.filter(pk=running).update(status=RunStatus.RUNNING)
    expire("owner", clock)

    outcomes, driven = scan(rival)

    assert set(outcomes) == {hinted, timer, parked_only, pending, running}
    assert sorted(driven) == sorted([hinted, timer, pending, running])


def test_a_renewed_holder_and_other_types_are_left_alone(make_registry, clock):
    rival = make_registry("rival")
    make_registry("live")
    make_registry("dead")
    live = parked("live", 10, holder="live")
    other = parked("other", 10, holder="dead")
    WorkflowRun.objects.filter(pk__in=other).update(workflow_name="t.other")
    # "live" is not expired; "dead" is, but holds only a type this engine lacks.
    expire("dead", clock)

    outcomes, _driven = scan(rival)

    assert outcomes == {}
    assert set(Claim.objects.filter(workflow_id__in=live).values_list("holder_id", "epoch")) == {
        ("live", 1)
    }
    assert set(Claim.objects.filter(workflow_id__in=other).values_list("holder_id")) == {("dead",)}
    assert Engine.objects.get(id="dead").revocations == 0  # the empty batch rolled back


def test_a_holder_that_renews_before_the_batch_is_not_deposed(make_registry, clock):
    rival, owner = make_registry("rival"), make_registry("owner")
    ids = parked("r", 5, holder="owner")
    cutoff = rival.timing.cutoff(clock())
    expire("owner", clock)
    owner.renew()  # renewed after the rival's read of the cutoff: live again

    batch, cursor = takeover.take_from_expired(rival, "owner", cutoff, NAMES, clock())

    assert batch.holder_live and batch.won == {} and cursor is None
    assert set(Claim.objects.filter(pk__in=ids).values_list("holder_id", "epoch")) == {("owner", 1)}


def test_cooldown_and_disposing(make_registry, clock):
    rival = make_registry("rival")
    ids = parked("c", 3, holder=None)
    rival.cooldown.record_loss(ids[0])
    outcomes, _driven = scan(rival)
    assert outcomes == {
        ids[0]: Outcome.BACKOFF_SKIPPED,
        ids[1]: Outcome.RECLAIMED,
        ids[2]: Outcome.RECLAIMED,
    }
    assert Claim.objects.get(pk=ids[0]).holder_id is None

    late = make_registry("late")
    more = parked("d", 3, holder=None)
    late.disposing = True
    assert takeover.take_ownerless(late, more, NAMES, clock()).lost == more
    assert not Claim.objects.filter(pk__in=more, holder__isnull=False).exists()


def test_a_claim_won_while_disposing_is_released(make_registry, clock):
    rival = make_registry("rival")
    ids = parked("w", 3, holder=None, epoch=2)
    batch = takeover.take_ownerless(rival, ids, NAMES, clock())
    assert batch.won == dict.fromkeys(ids, 3)
    rival.disposing = True
    settled = takeover.settle(rival, batch, takeover=False)
    assert settled.released == ids and settled.kept == {}
    assert set(Claim.objects.filter(pk__in=ids).values_list("holder_id", "epoch")) == {(None, 3)}
    assert rival.held == {}


def test_a_run_that_finished_since_the_page_was_read_is_not_taken(make_registry, clock):
    rival = make_registry("rival")
    ids = parked("f", 2, holder=None)
    free, no_row, cursor = takeover.ownerless_page(NAMES, "waiting", using="default")
    assert free == ids and no_row == [] and cursor is None
    # Cancelled in between (the claim stays without a holder).
    WorkflowRun.objects.filter(pk=ids[0]).update(status=RunStatus.CANCELLED)
    batch = takeover.take_ownerless(rival, free, NAMES, clock())
    assert batch.won == {ids[1]: 2}
    assert Claim.objects.get(pk=ids[0]).holder_id is None


def _statements(action: Callable[[], object]) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        action()
    # Without the transaction's own statements and the bounded lock wait's settings.
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].split()[0] in {"SELECT", "UPDATE"}
        and not any(setting in q["sql"] for setting in ("set_config", "current_setting", "@@"))
    ]


@pytest.mark.parametrize("size", [10, 1000])
def test_statements_per_batch_do_not_grow_with_the_batch(make_registry, clock, size):
    rival = make_registry("rival")
    make_registry("owner")
    parked("s", size, holder="owner")
    parked("n", size, holder=None)
    expire("owner", clock)
    cutoff = rival.timing.cutoff(clock())

    def expired() -> None:
        batch, _cursor = takeover.take_from_expired(
            rival, "owner", cutoff, NAMES, clock(), limit=size
        )
        takeover.settle(rival, batch, takeover=True)

    # bump the old holder, lock a page of its claims, read their runs, move them
    expired_sql = _statements(expired)
    assert [sql.split()[0] for sql in expired_sql] == ["UPDATE", "SELECT", "SELECT", "UPDATE"]
    assert all(len(sql) < 2000 + 40 * size for sql in expired_sql)

    def ownerless() -> None:
        free, _no_row, _cursor = takeover.ownerless_page(
            NAMES, "waiting", limit=size, using="default"
        )
        takeover.settle(rival, takeover.take_ownerless(rival, free, NAMES, clock()), takeover=False)

    # a page of runs, lock their free claims, re-read the runs, move them
    ownerless_sql = _statements(ownerless)
    assert [sql.split()[0] for sql in ownerless_sql] == ["SELECT", "SELECT", "SELECT", "UPDATE"]
    assert len(rival.held) == 2 * size


# -- the ownerless sweep reads the released claims, with a full sweep as backstop -----


def test_after_a_full_sweep_passes_read_only_the_claims_released_before_their_run_ended(
    make_registry, clock, monkeypatch
):
    rival = make_registry("rival")
    make_registry("owner")
    outcomes, _driven = scan(rival)  # the engine's first pass: the full sweep
    assert outcomes == {}
    held = parked("h", 300, holder="owner")  # live, held: never read again
    released = parked("r", 3, holder=None)
    unstamped = parked("u", 1, holder=None)
    Claim.objects.filter(pk__in=unstamped).update(released_at=None)  # a release not stamped

    with CaptureQueriesContext(connection) as queries:
        outcomes, _driven = scan(rival)
    if not connection.features.supports_partial_indexes:  # MySQL/MariaDB: always the full sweep
        assert outcomes == dict.fromkeys([*released, *unstamped], Outcome.RECLAIMED)
        return
    assert outcomes == dict.fromkeys(released, Outcome.RECLAIMED)
    assert not any(held[0] in q["sql"] for q in queries.captured_queries)
    # Taken: out of the released index (it has a holder now).
    assert takeover.released_page(NAMES, using="default") == ([], None)

    # The backstop: the full sweep of the started runs finds the unstamped one.
    monkeypatch.setattr("weft_django.ownership.passes.reclaim.FULL_SWEEP_INTERVAL", 0.0)
    outcomes, _driven = scan(rival)
    assert outcomes == dict.fromkeys(unstamped, Outcome.RECLAIMED)


def test_the_released_page_takes_started_runs_and_unstamps_ended_and_purged_ones():
    ids = parked("p", 6, holder=None)
    WorkflowRun.objects.filter(pk=ids[0]).update(status=RunStatus.COMPLETED)
    WorkflowRun.objects.filter(pk=ids[1]).update(status=RunStatus.CANCELLED)
    WorkflowRun.objects.filter(pk=ids[2]).delete()  # purged; the claim row stays
    WorkflowRun.objects.filter(pk=ids[3]).update(status=RunStatus.PENDING)  # the intake's
    WorkflowRun.objects.filter(pk=ids[4]).update(workflow_name="t.other")  # not registered here

    assert takeover.released_page(NAMES, using="default", limit=10) == ([ids[5]], None)
    stamped = Claim.objects.filter(released_at__isnull=False).values_list("pk", flat=True)
    assert sorted(stamped) == [ids[3], ids[4], ids[5]]
    # Keyset pages: a full page hands back the cursor.
    assert takeover.released_page(NAMES, using="default", limit=2) == ([], ids[4])
    assert takeover.released_page(NAMES, after=ids[4], using="default", limit=2) == (
        [ids[5]],
        None,
    )


def test_a_release_before_the_end_stamps_the_claim_and_the_end_unstamps_it(make_registry):
    owner = make_registry("owner")
    ids = parked("e", 3, holder=None)
    Claim.objects.update(released_at=None)
    for run_id in ids:
        assert owner.claim(run_id).outcome == Outcome.ACQUIRED
    owner.release(ids[0])  # let go of a started run
    release_statement("default", ids[1], "owner", owner.epoch_of(ids[1]), ended=True)
    assert owner.release_all() == 1  # ids[2], a graceful shutdown
    stamped = dict(Claim.objects.values_list("pk", "released_at"))
    assert stamped[ids[0]] is not None and stamped[ids[1]] is None and stamped[ids[2]] is not None
    revoke_statement("default", ids[2])  # an external transition (cancel, timeout) ends the run
    assert Claim.objects.get(pk=ids[2]).released_at is None
