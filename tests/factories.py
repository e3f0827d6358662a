"""factory-boy factories for every weft_django model.

Times come from Python's clock (``timezone.now()``), which is the database's
clock here to well under a second; leases are far enough from the expiry
boundary (live: +30 s, expired: -1 h) that no test depends on the skew. Tests
that walk the boundary use the ``clock`` fixture and the ownership layer.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
from django.db import connection
from django.utils import timezone

from weft_django.models import (
    Claim,
    Engine,
    EngineKind,
    EngineStatus,
    GlobalLease,
    OwnershipMarker,
    RunStatus,
    UpdateRequest,
    UpdateStatus,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)

LIVE_FOR = timedelta(seconds=30)
EXPIRED_AGO = timedelta(hours=1)


def _now() -> Any:
    return timezone.now()


class EngineFactory(factory.django.DjangoModelFactory):
    """A running worker engine with a live lease (``expired=True``, ``stopped=True``)."""

    class Meta:
        model = Engine

    id = factory.Sequence(lambda n: f"engine-{n:04d}")
    hostname = factory.Sequence(lambda n: f"host-{n % 3}.example")
    pid = factory.Sequence(lambda n: 1000 + n)
    kind = EngineKind.WORKER
    ownership_mode = "workflow-lease"
    status = EngineStatus.RUNNING
    started_at = factory.LazyFunction(lambda: _now() - timedelta(minutes=5))
    heartbeat_at = factory.LazyFunction(_now)
    lease_expires_at = factory.LazyFunction(lambda: _now() + LIVE_FOR)

    class Params:
        expired = factory.Trait(
            heartbeat_at=factory.LazyFunction(lambda: _now() - EXPIRED_AGO - LIVE_FOR),
            lease_expires_at=factory.LazyFunction(lambda: _now() - EXPIRED_AGO),
        )
        stopped = factory.Trait(
            status=EngineStatus.STOPPED,
            stopped_at=factory.LazyFunction(lambda: _now() - EXPIRED_AGO),
            lease_expires_at=factory.LazyFunction(lambda: _now() - EXPIRED_AGO),
        )
        disposing = factory.Trait(status=EngineStatus.DISPOSING)


class ClaimFactory(factory.django.DjangoModelFactory):
    """A claim held by a live engine at epoch 1 (``unheld=True``, ``expired=True``)."""

    class Meta:
        model = Claim

    workflow_id = factory.Sequence(lambda n: f"wf-{n:05d}")
    epoch = 1
    holder = factory.SubFactory(EngineFactory)
    claimed_at = factory.LazyFunction(_now)

    class Params:
        unheld = factory.Trait(holder=None, claimed_at=None)
        expired = factory.Trait(holder=factory.SubFactory(EngineFactory, expired=True))


class OwnershipMarkerFactory(factory.django.DjangoModelFactory):
    """The singleton marker (id 1); at most one per database."""

    class Meta:
        model = OwnershipMarker

    id = 1
    mode = "workflow-lease"
    established_at = factory.LazyFunction(lambda: _now() - timedelta(days=1))
    established_by = "engine-first"


class GlobalLeaseFactory(factory.django.DjangoModelFactory):
    """The singleton lease of mode ``lease``, held live (``unheld=True``, ``expired=True``)."""

    class Meta:
        model = GlobalLease

    id = 1
    epoch = 1
    holder = factory.SubFactory(EngineFactory, ownership_mode="lease")
    acquired_at = factory.LazyFunction(_now)
    expires_at = factory.LazyFunction(lambda: _now() + LIVE_FOR)

    class Params:
        unheld = factory.Trait(holder=None, acquired_at=None, expires_at=None)
        expired = factory.Trait(
            holder=factory.SubFactory(EngineFactory, ownership_mode="lease", expired=True),
            acquired_at=factory.LazyFunction(lambda: _now() - EXPIRED_AGO - LIVE_FOR),
            expires_at=factory.LazyFunction(lambda: _now() - EXPIRED_AGO),
        )


class WorkflowRunFactory(factory.django.DjangoModelFactory):
    """A pending run; traits for the other statuses.

    ``WorkflowRunFactory(claim=engine)`` also creates its claim held by
    ``engine`` (``claim__epoch=3`` sets the epoch); ``claim=True`` makes an
    unheld claim row.
    """

    class Meta:
        model = WorkflowRun
        # The ``claim`` hook saves what it creates itself; no second save of the run.
        skip_postgeneration_save = True

    id = factory.Sequence(lambda n: f"run-{n:05d}")
    workflow_name = "shop.approve_order"
    status = RunStatus.PENDING
    args = factory.LazyFunction(lambda: [42])
    kwargs = factory.LazyFunction(dict)

    class Params:
        running = factory.Trait(status=RunStatus.RUNNING, started_at=factory.LazyFunction(_now))
        waiting = factory.Trait(
            status=RunStatus.WAITING,
            started_at=factory.LazyFunction(_now),
            waiting_on=factory.LazyFunction(lambda: {"kind": "signal", "name": "decision"}),
            wake_at=factory.LazyFunction(lambda: _now() + timedelta(days=3)),
        )
        suspended = factory.Trait(status=RunStatus.SUSPENDED)
        completed = factory.Trait(
            status=RunStatus.COMPLETED,
            started_at=factory.LazyFunction(_now),
            finished_at=factory.LazyFunction(_now),
            result=factory.LazyFunction(lambda: {"status": "approved"}),
        )
        failed = factory.Trait(
            status=RunStatus.FAILED,
            finished_at=factory.LazyFunction(_now),
            error=factory.LazyFunction(lambda: {"type": "ValueError", "message": "boom"}),
        )

    @factory.post_generation
    def claim(obj: WorkflowRun, create: bool, extracted: Any, **kwargs: Any) -> None:
        if not create or extracted is None or extracted is False:
            return
        holder = extracted if isinstance(extracted, Engine) else None
        ClaimFactory(
            workflow_id=obj.pk,
            holder=holder,
            claimed_at=_now() if holder is not None else None,
            epoch=kwargs.get("epoch", 1),
        )


class WorkflowEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WorkflowEvent

    run = factory.SubFactory(WorkflowRunFactory, running=True)
    seq = factory.Sequence(lambda n: n + 1)
    kind = "step"
    name = "reserve_stock"
    result = factory.LazyFunction(lambda: {"reserved": True})
    engine_id = "engine-0000"
    epoch = 1


class WorkflowSignalFactory(factory.django.DjangoModelFactory):
    """A buffered, unconsumed signal (``consumed=True``)."""

    class Meta:
        model = WorkflowSignal

    run = factory.SubFactory(WorkflowRunFactory, waiting=True)
    signal_id = factory.Sequence(lambda n: f"sig-{n:05d}")
    name = "decision"
    payload = factory.LazyFunction(lambda: {"status": "approved"})

    class Params:
        consumed = factory.Trait(consumed_at=factory.LazyFunction(_now), consumed_seq=2)


class UpdateRequestFactory(factory.django.DjangoModelFactory):
    """A pending update request (``applied=True``, ``rejected=True``)."""

    class Meta:
        model = UpdateRequest

    run = factory.SubFactory(WorkflowRunFactory, waiting=True)
    update_id = factory.Sequence(lambda n: f"upd-{n:05d}")
    name = "set_quantity"
    payload = factory.LazyFunction(lambda: {"quantity": 2})
    status = UpdateStatus.PENDING
    expires_at = factory.LazyFunction(lambda: _now() + timedelta(minutes=5))

    class Params:
        applied = factory.Trait(
            status=UpdateStatus.APPLIED,
            response=factory.LazyFunction(lambda: {"quantity": 2}),
            applied_seq=3,
            responded_at=factory.LazyFunction(_now),
        )
        rejected = factory.Trait(
            status=UpdateStatus.REJECTED,
            error=factory.LazyFunction(lambda: {"type": "ValueError", "message": "too many"}),
            responded_at=factory.LazyFunction(_now),
        )


def deep_json_text(depth: int) -> str:
    """JSON text of ``depth`` nested lists around a number (``[[1]]`` for 2)."""
    return "[" * depth + "1" + "]" * depth


def store_raw_json(obj: Any, field: str, text: str) -> None:
    """Write JSON ``text`` into ``obj``'s ``field`` column by raw SQL, past every
    check of weft's (a row stored before a limit existed, or written by hand)."""
    model = type(obj)
    quote = connection.ops.quote_name
    value = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(model._meta.db_table)} "
            f"SET {quote(model._meta.get_field(field).column)} = {value} "
            f"WHERE {quote(model._meta.pk.column)} = %s",
            [text, obj.pk],
        )
