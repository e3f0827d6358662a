from __future__ import annotations

from weft_django.ownership.results import Acquired, LostRace, NotExpired


def test_acquire_takeover_cycle(make_registry, clock):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    assert a.acquire("wf-1") == Acquired("wf-1", 1)
    assert isinstance(b.acquire("wf-1"), LostRace)
    assert isinstance(b.claim("wf-1"), NotExpired)
    clock.advance(30 + 10)  # exactly at the deadline: still live
    assert isinstance(b.claim("wf-1"), NotExpired)
    clock.advance(0.001)
    result = b.claim("wf-1")
    assert result == Acquired("wf-1", 2, takeover=True)
    renewal = a.renew()
    assert [lost.workflow_id for lost in renewal.lost] == ["wf-1"]
