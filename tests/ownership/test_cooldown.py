"""The anti-thrash cooldown after a lost claim (docs/ownership.md).

Exponential from CLAIM_RENEW_INTERVAL (5 s), doubling per consecutive loss,
capped at 4 x CLAIM_TTL (120 s). A successful acquire or takeover clears the
window; the curve resets only once the claim survives a renewal.
"""

from __future__ import annotations

import pytest

from weft_django.exceptions import WeftWorkflowClaimLostWarning
from weft_django.ownership.claims.cooldown import Cooldown
from weft_django.ownership.claims.results import Acquired, BackoffSkipped

from ..conftest import FakeMonotonic

PAST_DEADLINE = 30 + 10 + 0.001


def test_delay_curve_doubles_from_the_base_and_is_capped_at_4x_ttl():
    cooldown = Cooldown(base=5.0, cap=4 * 30.0)
    assert [cooldown.delay_for(n) for n in range(0, 9)] == [
        0.0, 5.0, 10.0, 20.0, 40.0, 80.0, 120.0, 120.0, 120.0,
    ]  # fmt: skip
    assert cooldown.delay_for(200) == 120.0  # no overflow far out on the curve


def test_record_loss_walks_the_curve_and_blocks_until_its_end():
    now = FakeMonotonic()
    cooldown = Cooldown(base=5.0, cap=120.0, clock=now)
    assert cooldown.blocked_until("wf") is None
    expected = [5.0, 10.0, 20.0, 40.0, 80.0, 120.0, 120.0]
    for delay in expected:
        until = cooldown.record_loss("wf")
        assert until == now() + delay
        assert cooldown.blocked_until("wf") == until
        now.value = until - 0.001
        assert cooldown.blocked_until("wf") == until
        now.value = until  # the cooldown ends exactly at ``until``
        assert cooldown.blocked_until("wf") is None
    assert cooldown.blocked_until("other") is None
    assert len(cooldown) == 1


def test_clear_ends_the_window_and_forgive_resets_the_curve():
    now = FakeMonotonic()
    cooldown = Cooldown(base=5.0, cap=120.0, clock=now)
    for _ in range(4):
        cooldown.record_loss("wf")
    cooldown.clear("wf")
    assert cooldown.blocked_until("wf") is None
    assert len(cooldown) == 0
    assert cooldown.losses("wf") == 4
    assert cooldown.record_loss("wf") == now() + 80.0  # the fifth loss in a row
    cooldown.forgive({"wf"}, exclude={"wf"})
    assert cooldown.losses("wf") == 5
    cooldown.forgive({"wf"})
    assert (cooldown.losses("wf"), cooldown.blocked_until("wf")) == (0, None)
    assert cooldown.record_loss("wf") == now() + 5.0


def test_the_cap_follows_the_configured_ttl(make_registry, weft_settings):
    weft_settings(CLAIM_TTL=12.0, CLAIM_RENEW_INTERVAL=4.0)
    registry = make_registry("engine-a")
    assert (registry.cooldown.base, registry.cooldown.cap) == (4.0, 48.0)


def _lose(loser, winner, workflow_id, clock):
    """``loser`` holds ``workflow_id``; let it expire, ``winner`` takes it, ``loser`` renews."""
    clock.advance(PAST_DEADLINE)
    assert isinstance(winner.claim(workflow_id), Acquired)
    with pytest.warns(WeftWorkflowClaimLostWarning):
        assert [lost.workflow_id for lost in loser.renew().lost] == [workflow_id]
    winner.release(workflow_id)


def test_a_win_that_is_lost_again_backs_off_further(make_registry, clock, monotonic):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    delays = []
    for _ in range(4):
        monotonic.value += 1000  # any previous cooldown is over...
        assert isinstance(a.claim("wf"), Acquired)  # ...and the win clears the window
        _lose(a, b, "wf", clock)
        delays.append(a.cooldown.blocked_until("wf") - monotonic())
    assert delays == [5.0, 10.0, 20.0, 40.0]


def test_a_claim_that_survives_a_renewal_restarts_the_curve(make_registry, clock, monotonic):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    delays = []
    for _ in range(3):
        monotonic.value += 1000
        assert isinstance(a.claim("wf"), Acquired)
        a.renew()  # the claim survived a renewal: it is stable again
        _lose(a, b, "wf", clock)
        delays.append(a.cooldown.blocked_until("wf") - monotonic())
    assert delays == [5.0] * 3


def test_losses_without_a_win_in_between_grow_the_cooldown(make_registry, clock, monotonic):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    a.acquire("wf-1")
    a.acquire("wf-2")
    _lose(a, b, "wf-1", clock)
    first = a.cooldown.blocked_until("wf-1") - monotonic()
    # a second loss of the same workflow while no acquire has succeeded since
    a.cooldown.record_loss("wf-1")
    second = a.cooldown.blocked_until("wf-1") - monotonic()
    assert (first, second) == (5.0, 10.0)
    result = a.claim("wf-1")
    assert isinstance(result, BackoffSkipped)
    assert result.until == monotonic() + 10.0


@pytest.mark.parametrize("how", ["acquire", "takeover"])
def test_a_successful_acquire_or_takeover_clears_the_window(make_registry, clock, monotonic, how):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    a.acquire("wf")
    _lose(a, b, "wf", clock)
    a.cooldown.record_loss("wf")  # two losses: 10 s
    monotonic.value = a.cooldown.blocked_until("wf")
    if how == "takeover":
        b.acquire("wf")
        clock.advance(PAST_DEADLINE)
        a.renew()
        result = a.claim("wf")
        assert result.takeover
    else:
        result = a.acquire("wf")
    assert isinstance(result, Acquired)
    assert a.cooldown.blocked_until("wf") is None
    assert len(a.cooldown) == 0
    # lost again before surviving a renewal: the curve goes on (third loss: 20 s)
    _lose(a, make_registry("engine-c"), "wf", clock)
    assert a.cooldown.blocked_until("wf") == monotonic() + 20.0
