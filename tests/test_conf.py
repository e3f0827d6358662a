"""``weft_django.conf``: lazy reads of ``settings.WEFT``, defaults, validation."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from weft_django import WeftError, conf
from weft_django.conf import DEFAULTS, WeftSettings, get_settings, problems
from weft_django.exceptions import WeftConfigurationError
from weft_django.ownership.modes import STRATEGIES, ownership_class

# The defaults docs/operations.md documents.
DOCUMENTED_DEFAULTS = {
    "OWNERSHIP": "workflow-lease",
    "CLAIM_TTL": 30.0,
    "CLAIM_RENEW_INTERVAL": 5.0,
    "LEASE_TTL": 30.0,
    "LEASE_RENEW_INTERVAL": 5.0,
    "TICK_INTERVAL": 0.25,
    "UPDATE_RESPONSE_TTL": 300.0,
    "IDLE_IN_TRANSACTION_TIMEOUT": 30.0,
    "MAX_PAYLOAD_BYTES": 262144,
    "NOTIFY": True,
    "RETENTION": None,
    "SCHEDULES": None,
    "QUEUES": None,
}


def test_defaults_match_the_design() -> None:
    assert DEFAULTS == DOCUMENTED_DEFAULTS
    assert conf.MODES == ("workflow-lease", "lease", "none")


@pytest.mark.parametrize("value", ["absent", {}, None])
def test_defaults_apply_when_nothing_is_set(settings: Any, value: Any) -> None:
    if value == "absent":
        del settings.WEFT
    else:
        settings.WEFT = value
    config = get_settings()
    assert config == WeftSettings(
        ownership="workflow-lease",
        claim_ttl=30.0,
        claim_renew_interval=5.0,
        lease_ttl=30.0,
        lease_renew_interval=5.0,
        tick_interval=0.25,
        update_response_ttl=300.0,
        max_payload_bytes=262144,
        notify=True,
    )


def test_partial_settings_fill_in_defaults(settings: Any) -> None:
    settings.WEFT = {"CLAIM_TTL": 60, "CLAIM_RENEW_INTERVAL": 10}
    config = get_settings()
    assert (config.claim_ttl, config.claim_renew_interval) == (60.0, 10.0)
    assert isinstance(config.claim_ttl, float)
    assert config.lease_ttl == 30.0 and config.notify is True


def test_timedelta_durations_become_seconds(settings: Any) -> None:
    settings.WEFT = {
        "CLAIM_TTL": timedelta(minutes=2),
        "CLAIM_RENEW_INTERVAL": timedelta(seconds=20),
        "TICK_INTERVAL": timedelta(milliseconds=50),
        "UPDATE_RESPONSE_TTL": timedelta(hours=1),
    }
    config = get_settings()
    assert config.claim_ttl == 120.0
    assert config.claim_renew_interval == 20.0
    assert config.tick_interval == pytest.approx(0.05)
    assert config.update_response_ttl == 3600.0


def test_reads_are_lazy_and_follow_override_settings() -> None:
    before = get_settings()
    with override_settings(WEFT={"OWNERSHIP": "lease", "LEASE_TTL": 90, "NOTIFY": False}):
        inside = get_settings()
        assert inside.ownership == "lease"
        assert inside.lease_ttl == 90.0
        assert inside.notify is False
        with override_settings(WEFT={"OWNERSHIP": "none"}):
            assert get_settings().ownership == "none"
        assert get_settings().ownership == "lease"
    assert get_settings() == before


def test_settings_fixture_changes_take_effect(settings: Any) -> None:
    settings.WEFT = {"TICK_INTERVAL": 1}
    assert get_settings().tick_interval == 1.0
    settings.WEFT = {"TICK_INTERVAL": 2}
    assert get_settings().tick_interval == 2.0


def test_weft_settings_is_immutable() -> None:
    config = get_settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.claim_ttl = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("mode", "renew", "ttl"),
    [("workflow-lease", 5.0, 30.0), ("none", 5.0, 30.0), ("lease", 2.0, 12.0)],
)
def test_mode_dependent_timings(settings: Any, mode: str, renew: float, ttl: float) -> None:
    settings.WEFT = {"OWNERSHIP": mode, "LEASE_TTL": 12, "LEASE_RENEW_INTERVAL": 2}
    config = get_settings()
    timing = ownership_class(mode).timing_of(config)
    assert timing.renew_interval == renew
    assert timing.ttl == ttl
    assert timing.expiry_grace == 2 * renew
    assert timing.cooldown_cap == 4 * ttl


def test_every_mode_has_one_strategy_class() -> None:
    assert tuple(STRATEGIES) == conf.MODES
    assert all(STRATEGIES[mode].name == mode for mode in conf.MODES)


def test_the_expiry_rule_is_strict() -> None:
    timing = conf.Timing(ttl=30.0, renew_interval=5.0)
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert timing.cutoff(now) == now - timedelta(seconds=10)
    assert not timing.is_expired(now - timedelta(seconds=10), now)
    assert timing.is_expired(now - timedelta(seconds=10, microseconds=1), now)


INVALID = [
    pytest.param("not a dict", "weft.E001", id="E001"),
    pytest.param({"NOPE": 1}, "weft.E002", id="E002"),
    pytest.param({"OWNERSHIP": "lease-ish"}, "weft.E003", id="E003"),
    pytest.param({"TICK_INTERVAL": float("nan")}, "weft.E004", id="E004-nan"),
    pytest.param({"CLAIM_TTL": True}, "weft.E004", id="E004-bool"),
    pytest.param({"CLAIM_TTL": "30"}, "weft.E004", id="E004-str"),
    pytest.param({"CLAIM_TTL": 5, "CLAIM_RENEW_INTERVAL": 5}, "weft.E005", id="E005"),
    pytest.param({"LEASE_TTL": 10, "LEASE_RENEW_INTERVAL": 4}, "weft.E006", id="E006"),
    pytest.param({"MAX_PAYLOAD_BYTES": 0}, "weft.E007", id="E007"),
    pytest.param({"MAX_PAYLOAD_BYTES": 64 * 1024 * 1024 + 1}, "weft.E007", id="E007-huge"),
    pytest.param({"TICK_INTERVAL": 0.001}, "weft.E009", id="E009-tick"),
    pytest.param({"CLAIM_RENEW_INTERVAL": 0.05, "CLAIM_TTL": 1}, "weft.E009", id="E009-renew"),
    pytest.param({"LEASE_RENEW_INTERVAL": 0.01}, "weft.E009", id="E009-lease"),
    pytest.param({"NOTIFY": "yes"}, "weft.E008", id="E008"),
]


@pytest.mark.parametrize(("value", "problem_id"), INVALID)
def test_get_settings_raises_on_invalid_settings(
    settings: Any, value: Any, problem_id: str
) -> None:
    settings.WEFT = value
    with pytest.raises(WeftConfigurationError) as caught:
        get_settings()
    assert isinstance(caught.value, ImproperlyConfigured)
    assert isinstance(caught.value, WeftError)
    assert problem_id in str(caught.value)
    assert "hint:" in str(caught.value)


@pytest.mark.parametrize(("value", "problem_id"), INVALID)
def test_problems_reports_the_same_ids(value: Any, problem_id: str) -> None:
    if not isinstance(value, dict):
        with override_settings(WEFT=value):
            found = problems()
    else:
        found = problems(value)
    assert [p.id for p in found] == [problem_id]
    assert all(p.msg and p.hint for p in found)


def test_problems_of_an_explicit_dict_ignore_django_settings(settings: Any) -> None:
    settings.WEFT = {"NOTIFY": "broken"}
    assert problems({}) == []
    assert [p.id for p in problems()] == ["weft.E008"]


def test_problems_never_crash_on_odd_keys_or_values(settings: Any) -> None:
    """An invalid WEFT never crashes ``problems()`` itself (the system check)."""
    settings.WEFT = {1: object(), "OWNERSHIP": object(), "CLAIM_TTL": 10**400}
    assert [p.id for p in problems()] == ["weft.E002", "weft.E003", "weft.E004"]


SETTING_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.timedeltas(),
    st.text(max_size=12),
    st.sampled_from(conf.MODES),
    st.lists(st.integers(), max_size=2),
)
SETTING_DICTS = st.dictionaries(
    st.one_of(st.sampled_from(list(DEFAULTS)), st.text(max_size=8), st.integers()),
    SETTING_VALUES,
    max_size=6,
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(raw=SETTING_DICTS)
def test_any_settings_give_problems_or_coherent_values(raw: dict[Any, Any]) -> None:
    """Validation never crashes, and whatever passes it is usable by the engine."""
    found = problems(raw)
    assert all(p.id.startswith("weft.E00") and p.hint for p in found)
    with override_settings(WEFT=raw):
        if found:
            with pytest.raises(WeftConfigurationError):
                get_settings()
            return
        config = get_settings()
    for name in ("claim_ttl", "claim_renew_interval", "lease_ttl", "lease_renew_interval"):
        value = getattr(config, name)
        assert 0 < value < float("inf")
        timedelta(seconds=value)  # representable
    assert config.claim_renew_interval < config.claim_ttl
    assert config.claim_ttl >= 3 * config.claim_renew_interval
    assert config.lease_ttl >= 3 * config.lease_renew_interval
    assert config.ownership in conf.MODES
    assert isinstance(config.notify, bool)
    assert config.max_payload_bytes > 0
