"""Workflow versions side by side: registry, start, replay with the run's own code,
claims by (name, version), engine rows, the overview (docs/deploying-code.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import weft_django as weft
from weft_django import WorkflowNotRegisteredError
from weft_django.admin.overview import overview_data
from weft_django.exceptions import WeftConfigurationError
from weft_django.models import Engine, RunStatus, WorkflowRun
from weft_django.ownership import Served, db_now
from weft_django.runtime import registry
from weft_django.runtime.engine import TurnOutcome, WorkflowEngine
from weft_django.testing import WorkflowDriver

from .conftest import kinds
from .workflows import versioned_v1, versioned_v2


@contextmanager
def only_v1() -> Iterator[None]:
    """This process is an "old worker": version 2 is not registered in the block."""
    registry.unregister("tests.versioned", 2)
    try:
        yield
    finally:
        registry.register(versioned_v2._weft_definition)  # type: ignore[attr-defined]


def test_versions_register_side_by_side() -> None:
    assert registry.registered_versions()["tests.versioned"] == [1, 2]
    assert registry.get("tests.versioned").fn is versioned_v2  # the highest
    assert registry.get("tests.versioned", 1).fn is versioned_v1
    assert registry.resolve(versioned_v1).version == 1  # a function: its own version
    assert registry.resolve("tests.versioned", 1).fn is versioned_v1
    assert registry.is_registered("tests.versioned", 2)
    assert not registry.is_registered("tests.versioned", 3)
    served = registry.served()
    assert "tests.versioned" in served and served.versions["tests.versioned"] == {1, 2}


def test_the_same_version_twice_is_refused() -> None:
    def other(ctx: Any) -> None:
        return None

    with pytest.raises(WeftConfigurationError, match="version 1 is registered twice"):
        weft.workflow(name="tests.versioned", version=1)(other)
    assert registry.get("tests.versioned", 1).fn is versioned_v1


def test_start_picks_the_highest_version_or_the_one_asked(db: None) -> None:
    assert WorkflowRun.objects.get(pk=weft.start("tests.versioned").id).workflow_version == 2
    run = weft.start("tests.versioned", version=1, workflow_id="asked-v1")
    assert WorkflowRun.objects.get(pk=run.id).workflow_version == 1
    run = weft.start(versioned_v1, workflow_id="fn-v1")
    assert WorkflowRun.objects.get(pk=run.id).workflow_version == 1


def test_an_unknown_version_is_refused_and_nothing_is_stored(db: None) -> None:
    with pytest.raises(WorkflowNotRegisteredError, match="No version 3 of workflow") as caught:
        weft.start("tests.versioned", version=3, workflow_id="v3")
    assert (caught.value.name, caught.value.version) == ("tests.versioned", 3)
    assert not WorkflowRun.objects.filter(pk="v3").exists()


def test_each_run_replays_with_its_own_version(driver: WorkflowDriver) -> None:
    weft.start("tests.versioned", version=1, workflow_id="r1")
    weft.start("tests.versioned", workflow_id="r2")
    assert driver.run_until_idle() == {"parked": 2}
    for run_id in ("r1", "r2"):
        weft.signal(run_id, "go")
    assert driver.run_until_idle() == {"completed": 2}
    # ctx.workflow_version is the run's version, and its code ran.
    assert weft.result("r1", timeout=0) == {"code": 1, "version": 1}
    assert weft.result("r2", timeout=0) == {"code": 2, "version": 2}
    assert kinds("r1") == [
        ("step", "v1-first"),
        ("wait", "signal:go"),
        ("signal", "go"),
        ("step", "v1-last"),
    ]
    assert kinds("r2")[:2] == [("step", "v2-first"), ("step", "v2-second")]


def test_engine_rows_record_the_versions_they_serve(driver: WorkflowDriver) -> None:
    workflows = Engine.objects.get(pk=driver.engine.engine_id).workflows
    assert workflows["tests.versioned"] == [1, 2]
    assert workflows["tests.echo"] == [1]


def test_a_worker_claims_only_the_versions_it_has(db: None, weft_settings: Any) -> None:
    weft.start("tests.versioned", version=1, workflow_id="c-v1")
    weft.start("tests.versioned", version=2, workflow_id="c-v2")
    engine = WorkflowEngine().start()
    try:
        old = Served([("tests.versioned", 1)])
        assert engine.ownership.claim_pending(db_now(), old, 10) == ["c-v1"]
        new = Served([("tests.versioned", 1), ("tests.versioned", 2)])
        assert engine.ownership.claim_pending(db_now(), new, 10) == ["c-v2"]
    finally:
        engine.shutdown()


def test_a_run_of_a_version_not_registered_here_is_released_undriven(
    db: None, weft_settings: Any
) -> None:
    weft.start("tests.versioned", version=2, workflow_id="u-v2")
    with only_v1():
        engine = WorkflowEngine().start()
        try:
            assert engine.claim_and_drive("u-v2") == TurnOutcome.NOT_ELIGIBLE
        finally:
            engine.shutdown()
    run = WorkflowRun.objects.get(pk="u-v2")
    assert run.status == RunStatus.PENDING and not kinds("u-v2")


def test_overview_names_runs_no_live_worker_can_serve(db: None) -> None:
    for index in range(3):
        weft.start("tests.versioned", version=2, workflow_id=f"o-v2-{index}")
    weft.start("tests.versioned", version=1, workflow_id="o-v1")
    assert overview_data(db_now())["unserved"] == []  # no live engine at all: not judged
    with only_v1(), WorkflowDriver():  # an engine that serves v1 only
        [unserved] = overview_data(db_now())["unserved"]
    assert str(unserved) == "tests.versioned v2: 3 runs, no live worker has this version"
    assert unserved.served_versions == (1,)
    with WorkflowDriver():  # both versions served now
        assert overview_data(db_now())["unserved"] == []


def test_the_served_condition_groups_names_by_their_versions() -> None:
    from weft_django.ownership.claims.served import admits, served_sql

    served = Served([("a", 1), ("b", 1), ("c", 1), ("c", 2)])
    sql, params = served_sql(None, "n", "v", served)
    assert sql == "((n IN (%s, %s) AND v IN (%s)) OR (n IN (%s) AND v IN (%s, %s)))"
    assert params == ["a", "b", 1, "c", 1, 2]
    assert served_sql(None, "n", "v", ["b", "a"]) == ("n IN (%s, %s)", ["a", "b"])
    assert admits(served, "c", 2) and not admits(served, "a", 2) and not admits(served, "d", 1)
    assert admits(["a"], "a", 7)  # a plain list of names: any version
    assert registry.served() is registry.served()  # built once per registry change


def test_the_worker_start_line_names_the_versions() -> None:
    summary = registry.served_summary()
    assert "tests.versioned v1/v2" in summary.split(", ")
    assert "tests.echo" in summary.split(", ")


def test_a_start_inside_a_transaction_keeps_the_version(db: None) -> None:
    from django.db import transaction

    with transaction.atomic():
        weft.start("tests.versioned", version=1, workflow_id="in-txn")
    assert WorkflowRun.objects.get(pk="in-txn").workflow_version == 1


def test_retry_and_fork_keep_the_old_runs_version(driver: WorkflowDriver) -> None:
    weft.start("tests.versioned", version=1, workflow_id="old-v1")
    driver.run_until_idle()
    weft.cancel("old-v1", reason="test")
    retried = weft.retry("old-v1", new_id="old-v1-retried")
    forked = weft.fork("old-v1", from_step=1, new_id="old-v1-forked")
    for run_id in (retried.id, forked.id):
        assert WorkflowRun.objects.get(pk=run_id).workflow_version == 1
    driver.run_until_idle()
    for run_id in (retried.id, forked.id):
        weft.signal(run_id, "go")
    driver.run_until_idle()
    assert weft.result(retried.id, timeout=0) == {"code": 1, "version": 1}
    assert weft.result(forked.id, timeout=0) == {"code": 1, "version": 1}
    weft.start("tests.versioned", version=2, workflow_id="new-v2")
    weft.cancel("new-v2", reason="test")
    with only_v1(), pytest.raises(WorkflowNotRegisteredError, match="No version 2"):
        weft.retry("new-v2", new_id="new-v2-retried")
    assert not WorkflowRun.objects.filter(pk="new-v2-retried").exists()


def test_start_many_takes_a_version_per_request(db: None) -> None:
    outcomes = weft.start_many(
        [
            weft.StartRequest("tests.versioned", workflow_id="many-new"),
            weft.StartRequest("tests.versioned", workflow_id="many-v1", version=1),
        ]
    )
    assert [outcome.id for outcome in outcomes] == ["many-new", "many-v1"]
    versions = dict(WorkflowRun.objects.values_list("id", "workflow_version"))
    assert (versions["many-new"], versions["many-v1"]) == (2, 1)
    with pytest.raises(weft.StartManyError) as caught:
        weft.start_many([weft.StartRequest("tests.versioned", workflow_id="many-v3", version=3)])
    assert isinstance(caught.value.errors[0], WorkflowNotRegisteredError)
    assert not WorkflowRun.objects.filter(pk="many-v3").exists()
