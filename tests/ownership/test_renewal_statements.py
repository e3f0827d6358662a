"""A renewal pass costs the same number of SQL statements whatever the number of
claims held (docs/ownership.md): 10 and 10,000 claims, compared directly."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from weft_django.exceptions import WeftWorkflowClaimLostWarning
from weft_django.models import Claim, Engine
from weft_django.ownership.claims.registry import ClaimRegistry
from weft_django.ownership.claims.revoke import revoke_statement
from weft_django.ownership.clock import seconds

SMALL, LARGE = 10, 10_000
TIMESTAMP = re.compile(r"'\d{4}-\d\d-\d\d[ T][0-9:.+-]+'")


def holding(make_registry, clock, engine_id: str, count: int, *, db_clock: bool) -> ClaimRegistry:
    """An engine holding ``count`` claims, inserted in bulk and known to its registry."""
    registry = make_registry(engine_id)
    if db_clock:  # production's clock: the database's, one more statement per pass
        registry = ClaimRegistry(engine_id, timing=registry.timing, cooldown=registry.cooldown)
    ids = [f"{engine_id}-wf-{n:06d}" for n in range(count)]
    Claim.objects.bulk_create(
        [Claim(workflow_id=i, epoch=1, holder_id=engine_id, claimed_at=clock()) for i in ids],
        batch_size=2000,
    )
    for workflow_id in ids:
        registry._remember(workflow_id, 1)
    return registry


def steady_state_pass(registry: ClaimRegistry) -> list[str]:
    registry.renew()  # the first pass
    with CaptureQueriesContext(connection) as queries:
        result = registry.renew()
    assert result.engine_renewed
    assert result.lost == []
    return [TIMESTAMP.sub("'<time>'", q["sql"]) for q in queries.captured_queries]


@pytest.mark.parametrize("db_clock", [False, True], ids=["fake-clock", "db-clock"])
def test_steady_state_renewal_is_flat_from_10_to_10000_claims(make_registry, clock, db_clock):
    small = holding(make_registry, clock, "small", SMALL, db_clock=db_clock)
    large = holding(make_registry, clock, "large", LARGE, db_clock=db_clock)
    assert len(large.held) == LARGE
    clock.advance(20)
    small_sql = steady_state_pass(small)
    large_sql = steady_state_pass(large)
    assert len(small_sql) == len(large_sql)
    # the lease UPDATE, the revocations SELECT (+ the database clock when it is used)
    assert len(large_sql) == (3 if db_clock else 2)
    # the same statements, differing only in the engine id: nothing lists the claims
    assert [s.replace("large", "small") for s in large_sql] == small_sql
    assert all(len(sql) < 500 for sql in large_sql)
    # and it did renew every one of the 10,000: the lease they all live on moved
    lease = Engine.objects.get(id="large").lease_expires_at
    if not db_clock:
        assert lease == clock() + seconds(30)
    large.release_all()
    small.release_all()


def test_a_pass_that_finds_revocations_is_flat_too(make_registry, clock):
    small = holding(make_registry, clock, "small", SMALL, db_clock=False)
    large = holding(make_registry, clock, "large", LARGE, db_clock=False)
    counts = []
    for registry in (small, large):
        registry.renew()
        revoke_statement("default", f"{registry.engine_id}-wf-000003")
        with (
            CaptureQueriesContext(connection) as queries,
            pytest.warns(WeftWorkflowClaimLostWarning),
        ):
            result = registry.renew()
        assert [lost.workflow_id for lost in result.lost] == [f"{registry.engine_id}-wf-000003"]
        counts.append(len(queries.captured_queries))
    # one more SELECT (this engine's claims) only in the pass after a revocation
    assert counts == [3, 3]
    large.release_all()
    small.release_all()
