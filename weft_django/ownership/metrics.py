"""Prometheus metrics in weft_django's own registry. A workflow id is never a label."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .passes.outcomes import PassResult

REGISTRY = CollectorRegistry(auto_describe=True)

CLAIM_OUTCOMES = ("acquired", "takeover", "lost_race", "deposed", "backoff_skipped", "busy")

claim_attempts = Counter(
    "weft_workflow_claim_attempts_total",
    "Claim attempts by outcome.",
    ["outcome"],
    registry=REGISTRY,
)
for _outcome in CLAIM_OUTCOMES:
    claim_attempts.labels(outcome=_outcome)

claims_active = Gauge(
    "weft_workflow_claims_active",
    "Claims held by the engines of this process.",
    registry=REGISTRY,
)

renewal_failures = Counter(
    "weft_workflow_claim_renewal_failures_total",
    "Claims found lost, or renewal statements that failed, during renewal passes.",
    registry=REGISTRY,
)

pass_outcomes = Counter(
    "weft_pass_outcomes_total",
    "Per-run outcomes of the renewal loop's passes.",
    ["pass_name", "outcome"],
    registry=REGISTRY,
)

pass_seconds = Histogram(
    "weft_pass_duration_seconds",
    "Wall time of each renewal-loop pass.",
    ["pass_name"],
    registry=REGISTRY,
)

thread_restarts = Counter(
    "weft_worker_thread_restarts_total",
    "Background threads of a worker restarted after an unexpected exception.",
    ["thread"],
    registry=REGISTRY,
)

last_renewal = Gauge(
    "weft_engine_last_renewal_timestamp_seconds",
    "Unix time of this process's last successful renewal of its engine lease.",
    registry=REGISTRY,
)

turns = Counter(
    "weft_workflow_turns_total",
    "Workflow turns driven by this process, by how they ended.",
    ["outcome"],
    registry=REGISTRY,
)


def observe_pass(result: PassResult) -> None:
    """Count a finished pass's outcomes and observe its duration."""
    for outcome, count in result.counts.items():
        pass_outcomes.labels(pass_name=result.name, outcome=outcome).inc(count)
    pass_seconds.labels(pass_name=result.name).observe(result.seconds)
