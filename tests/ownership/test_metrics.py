"""Ownership metrics in weft_django's Prometheus registry; workflow ids are never labels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from weft_django.exceptions import WeftWorkflowClaimLostWarning
from weft_django.models import Engine, EngineStatus
from weft_django.ownership.metrics import CLAIM_OUTCOMES, REGISTRY

ATTEMPTS = "weft_workflow_claim_attempts_total"
ACTIVE = "weft_workflow_claims_active"
FAILURES = "weft_workflow_claim_renewal_failures_total"
PAST_DEADLINE = 30 + 10 + 0.001
ROOT = Path(__file__).resolve().parents[2]


def test_the_six_claim_outcomes_are_exported_before_any_attempt():
    """In a fresh process, every outcome is already a sample (at 0), so dashboards and
    ``rate()`` see the series from the start."""
    assert set(CLAIM_OUTCOMES) == {
        "acquired",
        "takeover",
        "lost_race",
        "deposed",
        "backoff_skipped",
        "busy",
    }
    code = (
        "import django; django.setup()\n"
        "from prometheus_client import generate_latest\n"
        "from weft_django.ownership.metrics import REGISTRY\n"
        "print(generate_latest(REGISTRY).decode())\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "example_project.settings"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    for outcome in CLAIM_OUTCOMES:
        assert f'{ATTEMPTS}{{outcome="{outcome}"}} 0.0' in out
    assert f"{ACTIVE} 0.0" in out
    assert f"{FAILURES} 0.0" in out


def test_each_outcome_is_counted(make_registry, clock, monotonic, metric):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    before = {outcome: metric(ATTEMPTS, outcome=outcome) for outcome in CLAIM_OUTCOMES}

    def delta() -> dict[str, float]:
        return {o: metric(ATTEMPTS, outcome=o) - before[o] for o in CLAIM_OUTCOMES}

    a.acquire("wf")
    b.acquire("wf")
    assert delta() == dict.fromkeys(CLAIM_OUTCOMES, 0.0) | {"acquired": 1.0, "lost_race": 1.0}
    clock.advance(PAST_DEADLINE)
    b.claim("wf")
    assert delta()["takeover"] == 1.0
    with pytest.warns(WeftWorkflowClaimLostWarning):
        a.renew()
    assert delta()["deposed"] == 1.0
    a.claim("wf")
    a.acquire("wf")
    assert delta() == {
        "acquired": 1.0,
        "takeover": 1.0,
        "lost_race": 1.0,
        "deposed": 1.0,
        "backoff_skipped": 2.0,
        "busy": 0.0,  # counted when a takeover's lock wait times out (tests/integration)
    }


def test_claims_active_counts_the_claims_of_every_engine_in_the_process(
    make_registry, clock, metric
):
    base = metric(ACTIVE)
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    for n in range(3):
        a.acquire(f"a-{n}")
    b.acquire("b-0")
    assert metric(ACTIVE) == base + 4  # both engines' claims, not the last one's count
    a.acquire("a-0")  # already held: no change
    assert metric(ACTIVE) == base + 4
    a.release("a-0")
    assert metric(ACTIVE) == base + 3
    a.release("a-0")  # not held: no change
    assert metric(ACTIVE) == base + 3
    clock.advance(PAST_DEADLINE)
    b.renew()
    b.claim("a-1")
    assert metric(ACTIVE) == base + 4
    with pytest.warns(WeftWorkflowClaimLostWarning):
        a.renew()
    assert metric(ACTIVE) == base + 3
    assert a.release_all() == 1
    assert metric(ACTIVE) == base + 2
    assert b.release_all() == 2
    assert metric(ACTIVE) == base


def test_renewal_failures_count_lost_claims_and_failed_renewals(make_registry, clock, metric):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    for n in range(3):
        a.acquire(f"wf-{n}")
    base = metric(FAILURES)
    a.renew()
    assert metric(FAILURES) == base
    clock.advance(PAST_DEADLINE)
    b.claim("wf-0")
    b.claim("wf-1")
    with pytest.warns(WeftWorkflowClaimLostWarning):
        a.renew()
    assert metric(FAILURES) == base + 2
    Engine.objects.filter(id="engine-a").update(status=EngineStatus.STOPPED)
    a.renew()
    assert metric(FAILURES) == base + 3


def test_no_workflow_id_is_ever_a_label(make_registry, clock):
    a = make_registry("engine-a")
    b = make_registry("engine-b")
    ids = [f"order-{n}-needle" for n in range(4)]
    for workflow_id in ids:
        a.acquire(workflow_id)
        b.acquire(workflow_id)
    clock.advance(PAST_DEADLINE)
    b.claim(ids[0])
    with pytest.warns(WeftWorkflowClaimLostWarning):
        a.renew()
    a.claim(ids[0])
    a.release(ids[1])
    label_names = set()
    for family in REGISTRY.collect():
        for sample in family.samples:
            label_names |= set(sample.labels)
            for value in sample.labels.values():
                assert "needle" not in value
    # (queue, reason: flow control's, by queue name: docs/flow-control.md.)
    assert label_names <= {"outcome", "pass_name", "le", "queue", "reason"}
    assert b"needle" not in generate_latest(REGISTRY)
    assert "engine-a" not in generate_latest(REGISTRY).decode()


def test_a_pass_summary_is_json_with_counts_and_failures() -> None:

    from weft_django.ownership.passes.outcomes import Outcome, PassResult

    result = PassResult("signal_poll", started_at=datetime(2030, 1, 1, tzinfo=UTC))
    result.record("a", Outcome.WOKEN)
    result.record("b", Outcome.WAKE_FAILED, RuntimeError("no: connection"))
    summary = json.loads(json.dumps(result.done().summary("engine-x")))
    assert summary["pass"] == "signal_poll" and summary["engine_id"] == "engine-x"
    assert summary["counts"] == {"woken": 1, "wake_failed": 1}
    assert summary["failures"] == [
        {"run_id": "b", "error_type": "RuntimeError", "message": "no: connection"}
    ]
    assert summary["finished_at"] >= summary["started_at"]
