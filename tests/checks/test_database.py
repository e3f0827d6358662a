"""weft.W001: a second live engine in ownership mode 'none' (run with --database)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks

from tests.factories import EngineFactory

pytestmark = pytest.mark.django_db


def ids(databases: Any = ("default",)) -> list[str]:
    return [message.id for message in checks.run_checks(tags=["weft"], databases=databases)]


def test_two_live_engines_in_mode_none_warn(weft_settings: Any) -> None:
    weft_settings(OWNERSHIP="none")
    EngineFactory()
    assert "weft.W001" not in ids()
    EngineFactory()
    assert "weft.W001" in ids()
    # Only with --database: a plain `manage.py check` (no tags, no databases) skips it.
    # (Django >= 6.0 runs database checks on every alias once tags are given.)
    assert "weft.W001" not in [message.id for message in checks.run_checks(databases=None)]


def test_expired_engines_do_not_count(weft_settings: Any) -> None:
    weft_settings(OWNERSHIP="none")
    EngineFactory()
    EngineFactory(expired=True)
    assert "weft.W001" not in ids()


def test_other_modes_never_warn(weft_settings: Any) -> None:
    weft_settings(OWNERSHIP="workflow-lease")
    EngineFactory.create_batch(3)
    assert "weft.W001" not in ids()
