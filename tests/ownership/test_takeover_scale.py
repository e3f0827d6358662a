"""The batched takeover on real servers: engines racing for the same stranded
runs (PostgreSQL, MariaDB), and its query plans on a big, never analysed table
(PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction

from tests.concurrency import run_concurrently
from weft_django.conf import get_settings
from weft_django.models import Claim, Engine, RunStatus, WorkflowRun
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.clock import db_now
from weft_django.ownership.leases.engines import register_engine
from weft_django.ownership.passes import takeover
from weft_django.ownership.passes.outcomes import Outcome
from weft_django.ownership.passes.reclaim import reclaim_scan

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ["t.wf"]


def load(prefix: str, count: int, *, holder: str | None, status: str = "waiting") -> list[str]:
    ids = [f"{prefix}-{n:06d}" for n in range(count)]
    WorkflowRun.objects.bulk_create(
        [WorkflowRun(id=i, workflow_name="t.wf", status=status) for i in ids], batch_size=5000
    )
    stamp = db_now()
    # Released (a graceful shutdown) before the run ended: stamped for the sweep.
    released = stamp if holder is None and status in takeover.STARTED else None
    Claim.objects.bulk_create(
        [
            Claim(
                workflow_id=i,
                epoch=1,
                holder_id=holder,
                claimed_at=stamp if holder else None,
                released_at=released,
            )
            for i in ids
        ],
        batch_size=5000,
    )
    return ids


@pytest.mark.postgres
@pytest.mark.mysql
def test_engines_racing_for_the_same_stranded_runs_each_take_a_run_once(weft_settings):
    config = get_settings()
    engines = [register_engine(config, engine_id=f"e{n}", kind="test").id for n in range(4)]
    dead, rivals = engines[0], engines[1:]
    expired = load("x", 3000, holder=dead)
    ownerless = load("o", 2000, holder=None)
    Engine.objects.filter(id=dead).update(lease_expires_at=db_now() - timedelta(seconds=120))
    registries = [ClaimRegistry(engine_id) for engine_id in rivals]

    def scan(registry: ClaimRegistry):
        # Small batches, so the rivals' batches interleave.
        return lambda: reclaim_scan(
            registry, names=NAMES, drive=lambda run_id: True, limit=200, budget=60
        )

    everything = set(expired) | set(ownerless)
    won: list[set[str]] = [set() for _ in registries]
    # A batch that fails (a deadlock between the rivals' batches on MariaDB under
    # load) ends its pass early and is the next pass's work: a few rounds at most.
    for _round in range(4):
        results = run_concurrently(*(scan(registry) for registry in registries), timeout=120)
        for ids, result in zip(won, results, strict=True):
            reclaimed = (
                r for r, outcome in result.outcomes.items() if outcome == Outcome.RECLAIMED
            )
            ids.update(reclaimed)
        if set().union(*won) == everything:
            break
    assert set().union(*won) == everything
    assert sum(len(ids) for ids in won) == len(everything)  # nobody took a run twice
    claims = dict(Claim.objects.values_list("workflow_id", "holder_id"))
    epochs = set(Claim.objects.values_list("epoch", flat=True))
    assert epochs == {2}  # bumped exactly once
    for registry, ids in zip(registries, won, strict=True):
        assert set(registry.held) == ids
        assert all(claims[run_id] == registry.engine_id for run_id in ids)
        assert set(registry.held.values()) == {2}
    assert Engine.objects.get(id=dead).revocations >= 1


def _plan(query) -> str:
    with transaction.atomic():  # FOR UPDATE needs one, and the planner settings too
        takeover.in_index_order("default")
        return query.explain()


@pytest.mark.postgres
def test_takeover_queries_use_their_indexes_on_a_big_unanalysed_table(weft_settings):
    config = get_settings()
    register_engine(config, engine_id="owner", kind="test")
    # 40,000 parked runs held by "owner", 40,000 finished ones, 10,000 ownerless:
    # bulk-loaded, not analysed since (autovacuum off for these tables meanwhile):
    # whatever statistics exist predate the load (an earlier test's small tables).
    with connection.cursor() as cursor:
        for table in ("weft_django_workflowrun", "weft_django_claim"):
            cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        cursor.execute("SELECT clock_timestamp()")
        loading_from = cursor.fetchone()[0]
    try:
        load("held", 40_000, holder="owner")
        load("done", 40_000, holder=None, status=RunStatus.COMPLETED)
        load("free", 10_000, holder=None)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(max(last_analyze), max(last_autoanalyze)) "
                "FROM pg_stat_user_tables WHERE relname IN "
                "('weft_django_workflowrun', 'weft_django_claim')"
            )
            analysed = cursor.fetchone()[0]
            assert analysed is None or analysed < loading_from, "analysed after the load"

        expired = _plan(
            takeover.expired_page_query("owner", after="held-020000", using="default")
            .select_for_update(skip_locked=True)
            .values_list("workflow_id", "epoch")[: takeover.BATCH]
        )
        ownerless = _plan(
            takeover.ownerless_page_query("waiting", after="", using="default")[: takeover.BATCH]
        )
        released = _plan(takeover.released_page_query(after="", using="default")[: takeover.BATCH])
    finally:
        with connection.cursor() as cursor:
            for table in ("weft_django_workflowrun", "weft_django_claim"):
                cursor.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")

    for plan in (expired, ownerless, released):
        assert "Seq Scan" not in plan, plan
        assert "Sort" not in plan.replace("Sort Key", ""), plan  # index order, no sort
    assert "weft_claim_holder_wid_idx" in expired, expired
    assert "weft_run_started_id_idx" in ownerless, ownerless
    assert "weft_claim_released_idx" in released, released
