"""Workflows of the integration tests and benchmarks (every name starts with ``it.``).

``WEFT_IT_WORKFLOWS`` (comma-separated names) restricts which of them this
process registers, so a test can start a worker that lacks a workflow type.
Unset or empty: all of them.
"""

from __future__ import annotations

import os
import time
from typing import Any

import weft_django as weft
from weft_django import Context

from .models import StepExecution


def record(run_id: str, step: str, epoch: int, kind: str = "step") -> float:
    now = time.time()
    StepExecution.objects.create(
        run_id=run_id, step=step, kind=kind, pid=os.getpid(), epoch=epoch, at=now
    )
    return now


def nap(run_id: str, step: str, seconds: float) -> float:
    """A slow step: logs its start (outside any transaction), then sleeps.

    Only the first attempt sleeps: a worker that takes the run over re-runs
    the step (its checkpoint was never written) and goes straight on.
    """
    first = not StepExecution.objects.filter(run_id=run_id, step=step, kind="nap").exists()
    record(run_id, step, 0, kind="nap")
    if first:
        time.sleep(seconds)
    return seconds


def noop(index: int) -> int:
    return index


def steps(ctx: Context, n: int = 5, nap_at: int | None = None, nap_s: float = 0.0) -> int:
    """``n`` recorded steps (exactly-once rows); a slow nap before step ``nap_at``."""
    for index in range(n):
        if index == nap_at:
            ctx.step(nap, ctx.workflow_id, f"nap{index}", nap_s, name=f"nap{index}")
        ctx.step(
            record, ctx.workflow_id, f"s{index}", ctx.epoch, name=f"s{index}", transactional=True
        )
    return n


def special(ctx: Context, n: int = 2, nap_at: int | None = None, nap_s: float = 0.0) -> int:
    """The same as ``it.steps``, under a name some workers do not register."""
    return steps(ctx, n, nap_at, nap_s)


def waiter(ctx: Context, name: str = "go") -> Any:
    """Park on a signal; the step right after it records when the run resumed."""
    ctx.step(record, ctx.workflow_id, "before", ctx.epoch, name="before", transactional=True)
    payload = ctx.wait_for_signal(name)
    ctx.step(record, ctx.workflow_id, "resumed", ctx.epoch, name="resumed", transactional=True)
    return payload


def relay(ctx: Context, nap_s: float = 0.0) -> dict[str, Any]:
    """Step "before", wait for "go", (a slow nap), step "resumed", wait for
    "finish", step "done". The update "add" adds to a total and answers it."""
    total = [0]

    @ctx.on_update("add")
    def add(amount: int) -> dict[str, int]:
        total[0] += amount
        return {"total": total[0], "pid": os.getpid()}

    ctx.step(record, ctx.workflow_id, "before", ctx.epoch, name="before", transactional=True)
    go = ctx.wait_for_signal("go")
    if nap_s:
        ctx.step(nap, ctx.workflow_id, "nap", nap_s, name="nap")
    ctx.step(record, ctx.workflow_id, "resumed", ctx.epoch, name="resumed", transactional=True)
    finish = ctx.wait_for_signal("finish")
    ctx.step(record, ctx.workflow_id, "done", ctx.epoch, name="done", transactional=True)
    return {"go": go, "finish": finish, "total": total[0]}


def noop_steps(ctx: Context, n: int = 10) -> int:
    """``n`` no-op steps: the throughput benchmark's workload."""
    for index in range(n):
        ctx.step(noop, index, name=f"noop{index}")
    return n


WORKFLOWS = {
    "it.steps": steps,
    "it.special": special,
    "it.waiter": waiter,
    "it.relay": relay,
    "it.noop_steps": noop_steps,
}

_enabled = [name for name in os.environ.get("WEFT_IT_WORKFLOWS", "").split(",") if name]
for _name, _fn in WORKFLOWS.items():
    if not _enabled or _name in _enabled:
        weft.workflow(name=_name)(_fn)
