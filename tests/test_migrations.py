"""Migrations are complete, and the constraints the protocol relies on are in the database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from tests.factories import (
    ClaimFactory,
    EngineFactory,
    GlobalLeaseFactory,
    OwnershipMarkerFactory,
    UpdateRequestFactory,
    WorkflowEventFactory,
    WorkflowRunFactory,
    WorkflowSignalFactory,
)
from weft_django.models import Claim, GlobalLease, OwnershipMarker


def test_makemigrations_is_clean(db: None) -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # pragma: no cover - the failure path
        pytest.fail(f"models have changes without a migration:\n{out.getvalue()} ({exc})")
    assert "No changes detected" in out.getvalue()


def test_migrations_are_named(db: None) -> None:
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    names = [name for app, name in loader.disk_migrations if app == "weft_django"]
    assert names
    assert not [name for name in names if "auto_" in name]


def raises_integrity_error(action: Callable[[], Any]) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        action()


@pytest.mark.django_db
class TestConstraints:
    def test_ownership_marker_is_a_singleton(self) -> None:
        OwnershipMarkerFactory()
        raises_integrity_error(
            lambda: OwnershipMarker.objects.create(
                id=2, mode="lease", established_at=timezone.now()
            )
        )
        raises_integrity_error(
            lambda: OwnershipMarker.objects.create(
                id=1, mode="lease", established_at=timezone.now()
            )
        )
        assert OwnershipMarker.objects.count() == 1

    def test_marker_id_must_be_one_even_when_absent(self) -> None:
        raises_integrity_error(
            lambda: OwnershipMarker.objects.create(
                id=2, mode="lease", established_at=timezone.now()
            )
        )

    def test_global_lease_is_a_singleton(self) -> None:
        GlobalLeaseFactory()
        raises_integrity_error(lambda: GlobalLease.objects.create(id=2))
        raises_integrity_error(lambda: GlobalLease.objects.create(id=1))
        assert GlobalLease.objects.count() == 1

    def test_global_lease_epoch_is_not_negative(self) -> None:
        raises_integrity_error(lambda: GlobalLease.objects.create(id=1, epoch=-1))

    def test_event_seq_is_unique_per_run(self) -> None:
        event = WorkflowEventFactory(seq=1)
        WorkflowEventFactory(seq=1)  # another run: fine
        raises_integrity_error(lambda: WorkflowEventFactory(run=event.run, seq=1))

    def test_signal_id_is_unique_per_run(self) -> None:
        signal = WorkflowSignalFactory(signal_id="s-1")
        WorkflowSignalFactory(signal_id="s-1")  # another run: fine
        raises_integrity_error(lambda: WorkflowSignalFactory(run=signal.run, signal_id="s-1"))

    def test_update_id_is_unique_per_run(self) -> None:
        update = UpdateRequestFactory(update_id="u-1")
        UpdateRequestFactory(update_id="u-1")  # another run: fine
        raises_integrity_error(lambda: UpdateRequestFactory(run=update.run, update_id="u-1"))

    def test_claim_holder_needs_claimed_at(self) -> None:
        engine = EngineFactory()
        raises_integrity_error(
            lambda: Claim.objects.create(workflow_id="wf-x", epoch=1, holder=engine)
        )

    def test_claimed_at_needs_a_holder(self) -> None:
        raises_integrity_error(
            lambda: Claim.objects.create(workflow_id="wf-y", epoch=1, claimed_at=timezone.now())
        )

    def test_held_claim_needs_a_positive_epoch(self) -> None:
        engine = EngineFactory()
        raises_integrity_error(
            lambda: Claim.objects.create(
                workflow_id="wf-z", epoch=0, holder=engine, claimed_at=timezone.now()
            )
        )

    def test_claim_epoch_is_not_negative(self) -> None:
        raises_integrity_error(lambda: Claim.objects.create(workflow_id="wf-n", epoch=-1))

    def test_unheld_claim_with_epoch_zero_is_fine(self) -> None:
        Claim.objects.create(workflow_id="wf-0", epoch=0)
        ClaimFactory(unheld=True)
        assert Claim.objects.filter(holder__isnull=True).count() == 2

    def test_claim_survives_purging_its_run(self) -> None:
        engine = EngineFactory()
        run = WorkflowRunFactory(claim=engine, claim__epoch=5)
        run_id = run.pk
        run.delete()
        assert Claim.objects.get(workflow_id=run_id).epoch == 5

    def test_engine_with_claims_cannot_be_deleted(self) -> None:
        from django.db.models import ProtectedError

        claim = ClaimFactory()
        with pytest.raises(ProtectedError):
            claim.holder.delete()


@pytest.mark.mysql
def test_mysql_tables_compare_text_exactly_and_keep_their_foreign_keys(db: None) -> None:
    """Migration 0005 re-creates the foreign keys it had to drop to change collations."""
    from django.apps import apps
    from django.db import connection

    from weft_django.models import mysql_collation

    models = list(apps.get_app_config("weft_django").get_models())
    tables = [model._meta.db_table for model in models]
    expected = {
        (model._meta.db_table, field.column, field.related_model._meta.db_table)
        for model in models
        for field in model._meta.local_fields
        if field.is_relation
    }
    marks = ", ".join(["%s"] * len(tables))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME "
            "FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = DATABASE() "
            f"AND TABLE_NAME IN ({marks}) AND REFERENCED_TABLE_NAME IS NOT NULL",
            tables,
        )
        assert set(cursor.fetchall()) == expected
        cursor.execute(
            "SELECT DISTINCT COLLATION_NAME FROM information_schema.COLUMNS "
            f"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({marks}) "
            "AND DATA_TYPE IN ('char', 'varchar')",
            tables,
        )
        assert cursor.fetchall() == ((mysql_collation(connection),),)
    assert len(expected) == 5


@pytest.mark.django_db(transaction=True)
def test_0012_stamps_the_ownerless_claims_of_started_runs() -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        [("weft_django", "0011_wake_index_keys")],
        [("weft_django", "0012_claim_released_at")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    run, claim = (
        apps.get_model("weft_django", "WorkflowRun"),
        apps.get_model("weft_django", "Claim"),
    )
    engine = apps.get_model("weft_django", "Engine").objects.create(
        id="m-engine",
        pid=1,
        hostname="h",
        kind="worker",
        ownership_mode="workflow-lease",
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
        lease_expires_at=timezone.now(),
    )
    for run_id, status, holder in (
        ("waiting-free", "waiting", None),
        ("running-free", "running", None),
        ("waiting-held", "waiting", engine),
        ("done-free", "completed", None),
        ("pending-free", "pending", None),
    ):
        run.objects.create(id=run_id, workflow_name="t.wf", status=status)
        claim.objects.create(
            workflow_id=run_id,
            epoch=1,
            holder=holder,
            claimed_at=timezone.now() if holder else None,
        )
    try:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
        stamped = Claim.objects.filter(released_at__isnull=False).values_list("pk", flat=True)
        assert sorted(stamped) == ["running-free", "waiting-free"]
    finally:
        Claim.objects.all().delete()
        from weft_django.models import Engine, WorkflowRun

        WorkflowRun.objects.all().delete()
        Engine.objects.only("id").delete()  # the columns of the schema migrated to
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("weft_django"))


@pytest.mark.django_db(transaction=True)
def test_0013_stamps_the_free_claims_that_resume_left_unstamped() -> None:
    """Issue 24: a resumed run's claim had no holder and no stamp; 0013 stamps it
    (and the free claims of other started runs), not those of held, ended,
    suspended or pending runs, and keeps an existing stamp."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        [("weft_django", "0012_claim_released_at")],
        [("weft_django", "0013_claim_release_rule")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    run, claim = (
        apps.get_model("weft_django", "WorkflowRun"),
        apps.get_model("weft_django", "Claim"),
    )
    engine = apps.get_model("weft_django", "Engine").objects.create(
        id="m-engine",
        pid=1,
        hostname="h",
        kind="worker",
        ownership_mode="workflow-lease",
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
        lease_expires_at=timezone.now(),
    )
    earlier = timezone.now() - timedelta(hours=1)
    for run_id, status, holder, stamp in (
        ("resumed", "waiting", None, None),
        ("running-free", "running", None, None),
        ("stamped", "waiting", None, earlier),
        ("waiting-held", "waiting", engine, None),
        ("done-free", "completed", None, None),
        ("suspended-free", "suspended", None, None),
        ("pending-free", "pending", None, None),
    ):
        run.objects.create(id=run_id, workflow_name="t.wf", status=status)
        claim.objects.create(
            workflow_id=run_id,
            epoch=3,
            holder=holder,
            claimed_at=timezone.now() if holder else None,
            released_at=stamp,
        )
    try:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
        stamps = dict(
            Claim.objects.filter(released_at__isnull=False).values_list("pk", "released_at")
        )
        assert sorted(stamps) == ["resumed", "running-free", "stamped"]
        assert stamps["stamped"] == earlier
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(before)  # reversible: a no-op
        assert Claim.objects.filter(released_at__isnull=False).count() == 3
    finally:
        Claim.objects.all().delete()
        from weft_django.models import Engine, WorkflowRun

        WorkflowRun.objects.all().delete()
        Engine.objects.only("id").delete()  # the columns of the schema migrated to
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("weft_django"))
