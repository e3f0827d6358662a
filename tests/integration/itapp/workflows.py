"""Workflows of the integration tests and benchmarks (every name starts with ``it.``).

``WEFT_IT_WORKFLOWS`` (comma-separated names) restricts which of them this
process registers, so a test can start a worker that lacks a workflow type.
Unset or empty: all of them. ``WEFT_IT_VERSIONS`` (comma-separated, default
``1,2``) are the versions of ``it.versioned`` registered, so a test can run an
old worker (``1``) beside a new one; ``WEFT_IT_PATCHED=1`` deploys the change
of ``it.patchable`` (behind ``ctx.patched``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import weft_django as weft
from weft_django import Context

from .models import FlowSpan, StepExecution


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


def hold_transaction(run_id: str, epoch: int, seconds: float) -> int:
    """A transactional step that keeps its transaction open: it records its row (which
    commits only with the checkpoint), then, for the first owner only, sleeps inside
    the transaction, long enough to be frozen there."""
    record(run_id, "txn", epoch)
    if epoch == 1:
        time.sleep(seconds)
    return epoch


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


def lingers(ctx: Context, seconds: float = 2.5) -> float:
    """A run that lasts ``seconds`` on a durable timer, holding no thread: longer
    than a 1-s schedule's interval (the overlap policies' test)."""
    ctx.sleep(seconds)
    return seconds


def fails(ctx: Context, message: str = "boom") -> None:
    """One step, then the workflow raises: the run fails."""
    ctx.step(noop, 0, name="first")
    raise ValueError(message)


def mark(run_id: str, step: str, seconds: float) -> int:
    """An ordinary (not transactional) step with a side effect outside its
    checkpoint: its row stays even when the checkpoint is never written, so a
    step that ran twice shows as two rows (kind ``mark``)."""
    record(run_id, step, 0, kind="mark")
    time.sleep(seconds)
    return 0


def many_steps(ctx: Context, n: int = 200, step_s: float = 0.02) -> int:
    """``n`` short ordinary steps, each leaving one ``mark`` row per execution."""
    for index in range(n):
        ctx.step(mark, ctx.workflow_id, f"m{index}", step_s, name=f"m{index}")
    return n


def txn_hold(ctx: Context, seconds: float = 30.0) -> int:
    """One transactional step that holds its transaction open, then one more step."""
    ctx.step(hold_transaction, ctx.workflow_id, ctx.epoch, seconds, name="txn", transactional=True)
    ctx.step(record, ctx.workflow_id, "after", ctx.epoch, name="after", transactional=True)
    return ctx.epoch


def chaos_child(ctx: Context, index: int) -> int:
    ctx.step(record, ctx.workflow_id, "c1", ctx.epoch, name="c1", transactional=True)
    return 2 * index


def hold_briefly(run_id: str, epoch: int, seconds: float) -> int:
    """A transactional step that keeps its transaction open for ``seconds``."""
    record(run_id, "hold", epoch)
    time.sleep(seconds)
    return epoch


def chaos(ctx: Context, index: int, hold: float = 0.0) -> dict[str, Any]:
    """The chaos campaign's workload: transactional steps, an ordinary step, a durable
    timer, an update, a signal, a child workflow and a predicate wait; every result is
    determined by ``index`` (bench/chaos.py checks it)."""
    total = 0

    @ctx.on_update("add")
    def add(amount: int) -> int:
        nonlocal total
        total += amount
        return total

    run_id = ctx.workflow_id
    ctx.step(record, run_id, "t1", ctx.epoch, name="t1", transactional=True)
    ctx.step(nap, run_id, "n1", 0.05, name="n1")
    ctx.sleep(0.2 + (index % 5) * 0.1)
    if hold:
        ctx.step(hold_briefly, run_id, ctx.epoch, hold, name="hold", transactional=True)
    signal = ctx.wait_for_signal("go")
    child = ctx.start_child("it.chaos_child", index, workflow_id=f"{run_id}/child")
    child_value = child.result()
    ctx.wait_until(lambda: total > 0, timeout=600)
    ctx.step(record, run_id, "t2", ctx.epoch, name="t2", transactional=True)
    return {"index": index, "signal": signal, "child": child_value, "total": total}


def tree(ctx: Context, depth: int, nap_s: float = 2.0) -> Any:
    """A node of a tree of ``depth`` levels: a step "enter", then a child one
    level down (``it.tree_leaf`` at the bottom) and its result."""
    ctx.step(record, ctx.workflow_id, "enter", ctx.epoch, name="enter", transactional=True)
    child = "it.tree" if depth > 2 else "it.tree_leaf"
    return ctx.start_child(child, depth - 1, nap_s).result()


def tree_leaf(ctx: Context, depth: int, nap_s: float = 2.0) -> int:
    """The bottom of ``it.tree``: waits for "go", then a slow step (its start
    leaves a ``nap`` row), then a step "after"."""
    ctx.wait_for_signal("go")
    ctx.step(nap, ctx.workflow_id, "nap", nap_s, name="nap")
    ctx.step(record, ctx.workflow_id, "after", ctx.epoch, name="after", transactional=True)
    return depth


def versioned_v1(ctx: Context) -> dict[str, Any]:
    """Version 1: step "v1-a", wait for "go", step "v1-b"."""
    ctx.step(record, ctx.workflow_id, "v1-a", ctx.epoch, name="v1-a", transactional=True)
    ctx.wait_for_signal("go")
    ctx.step(record, ctx.workflow_id, "v1-b", ctx.epoch, name="v1-b", transactional=True)
    return {"code": 1, "version": ctx.workflow_version}


def versioned_v2(ctx: Context) -> dict[str, Any]:
    """Version 2, another order: a v1 history would not replay on it (nor the reverse)."""
    ctx.step(record, ctx.workflow_id, "v2-a", ctx.epoch, name="v2-a", transactional=True)
    ctx.step(record, ctx.workflow_id, "v2-b", ctx.epoch, name="v2-b", transactional=True)
    ctx.wait_for_signal("go")
    return {"code": 2, "version": ctx.workflow_version}


def patchable(ctx: Context) -> str:
    """Step "a", (the change: step "extra"), wait for "go", step "b"."""
    ctx.step(record, ctx.workflow_id, "a", ctx.epoch, name="a", transactional=True)
    new = os.environ.get("WEFT_IT_PATCHED") == "1" and ctx.patched("extra")
    if new:
        ctx.step(record, ctx.workflow_id, "extra", ctx.epoch, name="extra", transactional=True)
    ctx.wait_for_signal("go")
    ctx.step(record, ctx.workflow_id, "b", ctx.epoch, name="b", transactional=True)
    return "new" if new else "old"


def flow_span(run_id: str, key: str, hold: float) -> float:
    """Hold a flow-control slot for ``hold`` seconds; record the span: its start
    at once (autocommit, so a worker killed in the step leaves an open span),
    its end after the hold."""
    started = time.time()
    span = FlowSpan.objects.create(run_id=run_id, key=key, pid=os.getpid(), started=started)
    time.sleep(hold)
    FlowSpan.objects.filter(pk=span.pk).update(ended=time.time())
    return started


def fenced_span(run_id: str, key: str, hold: float) -> float:
    """The same, recorded in the step's fenced checkpoint transaction: kept only if
    this turn still owned the run (a frozen worker that wakes after a takeover
    adds none). Serialises steps on SQLite (one writer): PostgreSQL, MariaDB."""
    started = time.time()
    time.sleep(hold)
    FlowSpan.objects.create(
        run_id=run_id, key=key, pid=os.getpid(), started=started, ended=time.time()
    )
    return started


def flow_work(
    ctx: Context, key: str, hold: float = 0.1, turns: int = 2, fenced: bool = False
) -> int:
    """``turns`` turns (a short durable sleep between them), each holding its
    queue's slot for ``hold`` seconds (docs/flow-control.md); started with
    ``queue=`` and ``concurrency_key=key`` by the flow-control tests."""
    for turn in range(turns):
        if turn:
            ctx.sleep(0.05)
        if fenced:
            ctx.step(
                fenced_span, ctx.workflow_id, key, hold, name=f"span-{turn}", transactional=True
            )
        else:
            ctx.step(flow_span, ctx.workflow_id, key, hold, name=f"span-{turn}")
    return turns


WORKFLOWS = {
    "it.chaos": chaos,
    "it.chaos_child": chaos_child,
    "it.txn_hold": txn_hold,
    "it.steps": steps,
    "it.special": special,
    "it.waiter": waiter,
    "it.relay": relay,
    "it.noop_steps": noop_steps,
    "it.lingers": lingers,
    "it.fails": fails,
    "it.many_steps": many_steps,
    "it.tree": tree,
    "it.tree_leaf": tree_leaf,
    "it.patchable": patchable,
    "it.flow_work": flow_work,
}
VERSIONS = {1: versioned_v1, 2: versioned_v2}

_enabled = [name for name in os.environ.get("WEFT_IT_WORKFLOWS", "").split(",") if name]
for _name, _fn in WORKFLOWS.items():
    if not _enabled or _name in _enabled:
        weft.workflow(name=_name)(_fn)
_versions = os.environ.get("WEFT_IT_VERSIONS", "1,2").split(",")
for _version, _fn in VERSIONS.items():
    if str(_version) in _versions and (not _enabled or "it.versioned" in _enabled):
        weft.workflow(name="it.versioned", version=_version)(_fn)
