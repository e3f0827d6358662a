"""Flow control across real workers (docs/flow-control.md): a queue's
concurrency limit and its per-key limit hold on every worker at every
instant, while a worker is SIGKILLed mid-run.

Three workers of four threads on ``flowq`` (concurrency 2, one per key), 24
runs, half of them over 6 keys and half without a key (admitted at pickup),
each turn holding its slot 0.1 s and recording its span in
a row as it starts and ends (``it.flow_work``). The longer campaign (4 x
8 threads, SIGKILL and SIGSTOP) is ``python bench/chaos.py --flow``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

import weft_django as weft
from tests.integration.conftest import Workers
from tests.integration.itapp.models import FlowSpan
from tests.integration.queries import all_completed
from weft_django.flow.slots import slots_in_use

pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = {"flowq": {"concurrency": 2, "per_key_concurrency": 1}}
FAST_CLAIMS = {"WEFT_CLAIM_TTL": "1.5", "WEFT_CLAIM_RENEW_INTERVAL": "0.5"}


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The largest number of ``spans`` open at one instant (an end before a start
    at the same instant)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    open_now = peak = 0
    for _at, step in edges:
        open_now += step
        peak = max(peak, open_now)
    return peak


def test_limits_hold_across_workers_while_one_is_killed(
    workers: Workers, wait: Callable[..., object], weft_settings: Callable[..., None]
) -> None:
    weft_settings(QUEUES=QUEUES)
    settings = "tests.integration.settings_flow"
    pool = [
        workers.start(concurrency=4, settings=settings, ready=False, **FAST_CLAIMS)
        for _ in range(3)
    ]
    for process in pool:  # booted side by side
        workers.wait_ready(process)
    # Every other run has no key: its turn is admitted at pickup on PostgreSQL
    # and MariaDB (a batch per queue), a keyed one by its own turn.
    keys = [f"k{n % 6}" if n % 2 else "" for n in range(24)]
    ids = [
        weft.start("it.flow_work", key, 0.1, 1, queue="flowq", concurrency_key=key or None).id
        for key in keys
    ]
    wait(lambda: FlowSpan.objects.count() >= 4, 20, what="the first turns")
    killed_at = time.time()
    pool[0].send(signal.SIGKILL)
    wait(lambda: all_completed(ids), 60, what="every run to complete")
    # A span the killed worker left open ended when it died.
    spans = [
        (key, started, killed_at if ended is None else ended)
        for key, started, ended in FlowSpan.objects.values_list("key", "started", "ended")
    ]
    assert len({(k, s) for k, s, _ in spans}) >= len(ids)
    assert most_at_once([(s, e) for _, s, e in spans]) <= 2
    for key in {k for k, _, _ in spans if k}:
        assert most_at_once([(s, e) for k, s, e in spans if k == key]) <= 1, key
    time.sleep(0.2)
    assert slots_in_use("default") == {}  # nothing leaked
