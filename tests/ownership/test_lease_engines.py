"""Engine ids: generated, or given; never blank (claims are fenced by holder id)."""

from __future__ import annotations

import pytest

from weft_django.conf import get_settings
from weft_django.models import Engine
from weft_django.ownership.leases.engines import engine_id_or_new, register_engine
from weft_django.runtime.engine import WorkflowEngine


def test_no_id_gets_a_fresh_one_and_a_given_one_is_kept() -> None:
    assert engine_id_or_new(None) != engine_id_or_new(None)
    assert engine_id_or_new("engine-a") == "engine-a"


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_a_blank_engine_id_is_refused(db: None, blank: str) -> None:
    with pytest.raises(ValueError, match="engine id"):
        register_engine(get_settings(), engine_id=blank)
    with pytest.raises(ValueError, match="engine id"):
        WorkflowEngine(engine_id=blank)
    assert not Engine.objects.exists()
