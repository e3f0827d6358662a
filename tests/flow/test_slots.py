"""Concurrency slots, statement by statement: taken and freed, never more than
N, freed by the takeover of an expired claim, a stale owner refused."""

from __future__ import annotations

from collections.abc import Callable

from weft_django.flow.slots import release_slots, slots_in_use, take_slot
from weft_django.models import QueueSlot
from weft_django.ownership import Acquired
from weft_django.ownership.claims.registry import ClaimRegistry

from ..conftest import FakeClock


def _claimed(registry: ClaimRegistry, run_id: str) -> int:
    result = registry.acquire(run_id)
    assert isinstance(result, Acquired)
    return result.epoch


def _take(
    registry: ClaimRegistry,
    run_id: str,
    epoch: int,
    clock: FakeClock,
    *,
    key: str = "",
    size: int = 2,
) -> bool:
    return take_slot(
        "default",
        "payments",
        key,
        size,
        run_id=run_id,
        engine_id=registry.engine_id,
        epoch=epoch,
        now=clock(),
    )


def test_at_most_n_are_taken_and_a_release_frees_one(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    engine = make_registry()
    epochs = {run: _claimed(engine, run) for run in ("r1", "r2", "r3")}
    assert _take(engine, "r1", epochs["r1"], clock)
    assert _take(engine, "r1", epochs["r1"], clock)  # already held by that turn: no second
    assert _take(engine, "r2", epochs["r2"], clock)
    assert not _take(engine, "r3", epochs["r3"], clock)
    assert QueueSlot.objects.filter(queue="payments").count() == 2  # pre-numbered, unique
    assert slots_in_use("default") == {("payments", ""): 2}
    assert release_slots("default", "r1", engine.engine_id, epochs["r1"]) == 1
    assert _take(engine, "r3", epochs["r3"], clock)
    assert slots_in_use("default") == {("payments", ""): 2}


def test_per_key_slots_count_by_key(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    engine = make_registry()
    a, b, c = (_claimed(engine, run) for run in ("a", "b", "c"))
    assert _take(engine, "a", a, clock, key="customer-1", size=1)
    assert not _take(engine, "b", b, clock, key="customer-1", size=1)
    assert _take(engine, "c", c, clock, key="customer-2", size=1)


def test_a_takeover_frees_the_slot_and_the_stale_owner_cannot_free_the_new_one(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    old, new = make_registry(), make_registry()
    epoch = _claimed(old, "r1")
    other = _claimed(new, "r2")
    assert _take(old, "r1", epoch, clock, size=1)
    assert not _take(new, "r2", other, clock, size=1)
    # The old engine freezes; its lease expires; the new one takes r1 over.
    clock.advance(old.timing.ttl + 3 * old.timing.renew_interval + 1)
    new.renew()
    moved = new.takeover("r1", holder_id=old.engine_id, epoch=epoch)
    assert isinstance(moved, Acquired)
    # The same takeover freed r1's slot: taken by another run at once.
    assert _take(new, "r2", other, clock, size=1)
    # The stale owner's release (or a second take at its old epoch) changes nothing.
    assert release_slots("default", "r1", old.engine_id, epoch) == 0
    assert not _take(old, "r1", epoch, clock, size=1)
    assert slots_in_use("default") == {("payments", ""): 1}


def test_a_released_claim_frees_its_slot(
    make_registry: Callable[..., ClaimRegistry], clock: FakeClock
) -> None:
    engine = make_registry()
    one, two = _claimed(engine, "r1"), _claimed(engine, "r2")
    assert _take(engine, "r1", one, clock, size=1)
    engine.release("r1")  # a graceful stop's release: holder gone, epoch kept
    assert _take(engine, "r2", two, clock, size=1)
    # Taken again (a new epoch), r1 is refused: the slot is r2's.
    again = engine.acquire("r1")
    assert isinstance(again, Acquired)
    assert again.epoch == one + 1
    assert not _take(engine, "r1", again.epoch, clock, size=1)
