"""``conf.get_settings()`` validates once per change of ``settings.WEFT``."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from weft_django import conf
from weft_django.conf import get_settings
from weft_django.exceptions import WeftConfigurationError


@pytest.fixture
def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the settings were validated and built."""
    calls: list[int] = []
    build = conf._build

    def counted() -> conf.WeftSettings:
        calls.append(1)
        return build()

    monkeypatch.setattr(conf, "_build", counted)
    conf.clear_cache()
    return calls


def test_validated_once_while_unchanged(count_builds: list[int]) -> None:
    first = get_settings()
    for _ in range(100):
        assert get_settings() is first
    assert len(count_builds) == 1


def test_override_settings_is_seen(count_builds: list[int]) -> None:
    before = get_settings()
    with override_settings(WEFT={"CLAIM_TTL": 60, "CLAIM_RENEW_INTERVAL": 10}):
        inside = get_settings()
        assert inside.claim_ttl == 60.0
        assert inside.claim_renew_interval == 10.0
    after = get_settings()
    assert after == before
    assert after.claim_ttl == before.claim_ttl


def test_a_replaced_dict_is_seen_without_the_signal(
    monkeypatch: pytest.MonkeyPatch, count_builds: list[int]
) -> None:
    original: Any = getattr(settings, "WEFT", None)
    get_settings()
    # Assigned directly on the settings object: no setting_changed signal.
    monkeypatch.setattr(settings, "WEFT", {"TICK_INTERVAL": 0.5})
    assert get_settings().tick_interval == 0.5
    monkeypatch.setattr(settings, "WEFT", original)
    assert get_settings().tick_interval == conf.get_settings().tick_interval


def test_a_dict_changed_in_place_is_seen(count_builds: list[int]) -> None:
    weft = {"TICK_INTERVAL": 0.5}
    with override_settings(WEFT=weft):
        assert get_settings().tick_interval == 0.5
        builds = len(count_builds)
        weft["TICK_INTERVAL"] = 0.75  # same object, new value
        assert get_settings().tick_interval == 0.75
        assert len(count_builds) == builds + 1
        assert get_settings().tick_interval == 0.75
        assert len(count_builds) == builds + 1


def test_bad_settings_still_raise_every_time(count_builds: list[int]) -> None:
    with override_settings(WEFT={"OWNERSHIP": "nope"}):
        for _ in range(2):
            with pytest.raises(WeftConfigurationError, match=r"weft\.E003"):
                get_settings()
    get_settings()  # valid again once the override ends


def test_bad_settings_made_in_place_raise(count_builds: list[int]) -> None:
    weft: dict[str, Any] = {}
    with override_settings(WEFT=weft):
        get_settings()
        weft["CLAIM_TTL"] = -1
        with pytest.raises(WeftConfigurationError, match=r"weft\.E004"):
            get_settings()
        with pytest.raises(WeftConfigurationError):
            get_settings()


def test_a_non_dict_raises(count_builds: list[int]) -> None:
    with (
        override_settings(WEFT=["not", "a", "dict"]),
        pytest.raises(WeftConfigurationError, match="must be a dict"),
    ):
        get_settings()


def test_clear_cache_revalidates(count_builds: list[int]) -> None:
    get_settings()
    conf.clear_cache()
    get_settings()
    assert len(count_builds) == 2
