"""Workflow definitions for the runtime tests (every name starts with ``tests.``).

Steps count their executions in :data:`CALLS` (by step name) and append
:class:`~example_project.orders.models.StepLog` rows, so a test can assert
how many times a step's code ran and how many of its database writes
committed. Tests steer the workflows through :data:`STATE`:

* ``STATE["before"][step]`` / ``STATE["after"][step]``: one-shot callables run
  inside the step function before / after its side effects (simulated
  crashes, takeovers, operator calls from "another process");
* ``STATE["variant"]``: the "deployed code version" for nondeterminism tests;
* ``STATE["fail_times"]``: how many times :func:`flaky` raises before it works.

The autouse fixture in ``conftest.py`` resets all of it around every test.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import weft_django as weft
from example_project.orders.models import StepLog
from weft_django import (
    Context,
    InvalidIdError,
    RetryPolicy,
    StepFailedError,
    WaitTimeoutError,
    WorkflowArgumentsError,
    WorkflowCancelledError,
    WorkflowFailedError,
)

CALLS: Counter[str] = Counter()
LOG: list[Any] = []
STATE: dict[str, Any] = {}


class SimulatedCrash(BaseException):
    """Stands in for the process dying in the middle of a turn."""


def reset() -> None:
    CALLS.clear()
    LOG.clear()
    STATE.clear()
    STATE.update(before={}, after={}, variant="a", fail_times=0)


reset()


def hook(when: str, step: str, action: Callable[[], Any]) -> None:
    """Run ``action`` once, inside step ``step``, ``when`` = "before" or "after" its effects."""
    STATE[when][step] = action


def _fire(when: str, step: str) -> None:
    action = STATE[when].pop(step, None)
    if action is not None:
        action()


# -- step functions ------------------------------------------------------------


def log_step(run_id: str, step: str) -> str:
    """Count the call, append a StepLog row, return the step's name."""
    _fire("before", step)
    CALLS[step] += 1
    StepLog.objects.create(run_id=run_id, step=step)
    _fire("after", step)
    return step


def add(a: int, b: int) -> int:
    CALLS["add"] += 1
    return a + b


def noop() -> None:
    CALLS["noop"] += 1


def flaky(label: str) -> str:
    """Raise ``STATE["fail_times"]`` times, then return ``label``."""
    CALLS["flaky"] += 1
    if CALLS["flaky"] <= STATE["fail_times"]:
        raise ConnectionError(f"flaky attempt {CALLS['flaky']}")
    return label


def make_object() -> object:
    CALLS["make_object"] += 1
    return object()


# -- workflows ---------------------------------------------------------------


@weft.workflow(name="tests.steps")
def steps(ctx: Context, count: int = 5) -> list[str]:
    """``count`` logged steps named s0, s1, ..."""
    return [ctx.step(log_step, ctx.workflow_id, f"s{i}", name=f"s{i}") for i in range(count)]


@weft.workflow(name="tests.steps_around_signal")
def steps_around_signal(ctx: Context) -> dict[str, Any]:
    """s0, s1, wait for "go", s2, s3."""
    done = [ctx.step(log_step, ctx.workflow_id, f"s{i}", name=f"s{i}") for i in range(2)]
    go = ctx.wait_for_signal("go")
    done += [ctx.step(log_step, ctx.workflow_id, f"s{i}", name=f"s{i}") for i in range(2, 4)]
    return {"steps": done, "go": go}


@weft.workflow(name="tests.transactional")
def transactional(ctx: Context) -> list[str]:
    """s0 (plain), tx (transactional=True), s2 (plain)."""
    first = ctx.step(log_step, ctx.workflow_id, "s0", name="s0")
    middle = ctx.step(log_step, ctx.workflow_id, "tx", name="tx", transactional=True)
    last = ctx.step(log_step, ctx.workflow_id, "s2", name="s2")
    return [first, middle, last]


@weft.workflow(name="tests.transactional_first")
def transactional_first(ctx: Context) -> list[str]:
    """A transactional step as the run's first write (it also marks the run running)."""
    first = ctx.step(log_step, ctx.workflow_id, "tx", name="tx", transactional=True)
    return [first, ctx.step(log_step, ctx.workflow_id, "s1", name="s1")]


@weft.workflow(name="tests.transactional_retry")
def transactional_retry(ctx: Context) -> str:
    """A transactional step whose first attempt writes, then raises (rolled back)."""
    return ctx.step(
        log_step,
        ctx.workflow_id,
        "tx",
        name="tx",
        transactional=True,
        retry=RetryPolicy(max_attempts=2, initial_interval=0),
    )


@weft.workflow(name="tests.collect_signals")
def collect_signals(ctx: Context, name: str, count: int, timeout: float | None = None) -> list[Any]:
    return [ctx.wait_for_signal(name, timeout=timeout) for _ in range(count)]


@weft.workflow(name="tests.signal_or_timeout")
def signal_or_timeout(ctx: Context, timeout: float) -> dict[str, Any]:
    """The timeout is catchable, and the workflow goes on with a step after it."""
    try:
        got = ctx.wait_for_signal("answer", timeout=timeout)
    except WaitTimeoutError as exc:
        LOG.append(("timeout", type(exc).__name__, isinstance(exc, TimeoutError)))
        after = ctx.step(log_step, ctx.workflow_id, "after_timeout", name="after_timeout")
        return {"timed_out": True, "after": after}
    return {"timed_out": False, "got": got}


@weft.workflow(name="tests.sleeper")
def sleeper(ctx: Context, seconds: float) -> list[str]:
    before = ctx.step(log_step, ctx.workflow_id, "before", name="before")
    ctx.sleep(timedelta(seconds=seconds))
    after = ctx.step(log_step, ctx.workflow_id, "after", name="after")
    return [before, after]


@weft.workflow(name="tests.with_timeout", timeout=60)
def with_timeout(ctx: Context) -> Any:
    """Execution timeout of 60 s; waits for a signal that never comes."""
    ctx.step(log_step, ctx.workflow_id, "s0", name="s0")
    return ctx.wait_for_signal("never")


@weft.workflow(name="tests.child_add")
def child_add(ctx: Context, value: int) -> int:
    return ctx.step(add, value, 100)


@weft.workflow(name="tests.child_fail")
def child_fail(ctx: Context) -> None:
    ctx.step(noop)
    raise ValueError("the child broke")


@weft.workflow(name="tests.child_waits")
def child_waits(ctx: Context) -> Any:
    return ctx.wait_for_signal("release")


@weft.workflow(name="tests.parent")
def parent(ctx: Context, child: str, *args: Any, child_id: str | None = None) -> dict[str, Any]:
    handle = ctx.start_child(child, *args, workflow_id=child_id)
    try:
        value = handle.result()
    except WorkflowFailedError as exc:
        error = exc.error
        return {"child": handle.id, "failed": error.get("type"), "msg": error.get("message")}
    except WorkflowCancelledError:
        return {"child": handle.id, "cancelled": True}
    return {"child": handle.id, "result": value}


@weft.workflow(name="tests.child_after_wait")
def child_after_wait(ctx: Context) -> dict[str, Any]:
    """Starts a child after a signal wait: the child's default id depends on whether
    the wait parked (it then left a marker in history before the child_start)."""
    ctx.wait_for_signal("go")
    handle = ctx.start_child("tests.child_add", 1)
    return {"child": handle.id, "result": handle.result()}


@weft.workflow(name="tests.parent_catches_bad_arguments")
def parent_catches_bad_arguments(ctx: Context) -> dict[str, Any]:
    """Starts a child with arguments it cannot take, catches the error, then a good one."""
    try:
        ctx.start_child("tests.child_add", 1, 2)
    except WorkflowArgumentsError as exc:
        refused = str(exc)
    handle = ctx.start_child("tests.child_add", 3)
    return {"refused": refused, "child": handle.id, "result": handle.result()}


@weft.workflow(name="tests.parent_bad_child")
def parent_bad_child(ctx: Context) -> str:
    ctx.start_child("tests.child_add", object())
    return "unreachable"


@weft.workflow(name="tests.nondeterministic")
def nondeterministic(ctx: Context) -> str:
    """The step name depends on STATE["variant"], standing in for a code change."""
    ctx.step(log_step, ctx.workflow_id, "first", name=f"first-{STATE['variant']}")
    ctx.wait_for_signal("go")
    ctx.step(log_step, ctx.workflow_id, "last", name="last")
    return STATE["variant"]


@weft.workflow(name="tests.nondeterministic_hidden")
def nondeterministic_hidden(ctx: Context) -> str:
    """Tries to hide a mismatch behind ``except Exception``, twice."""
    try:
        ctx.step(noop, name=f"first-{STATE['variant']}")
    except Exception as exc:
        LOG.append(("caught", type(exc).__name__))
    try:
        ctx.wait_for_signal("go")
        ctx.step(noop, name="second")
    except Exception as exc:
        LOG.append(("caught", type(exc).__name__))
    return "hidden"


@weft.workflow(name="tests.ends_early")
def ends_early(ctx: Context) -> str:
    """Variant "a" waits for "go" after s0; "return" returns and "raise" raises there."""
    ctx.step(log_step, ctx.workflow_id, "s0", name="s0")
    if STATE["variant"] == "return":
        return "returned early"
    if STATE["variant"] == "raise":
        raise LookupError("raised early")
    ctx.wait_for_signal("go")
    return "waited"


@weft.workflow(name="tests.retrying")
def retrying(ctx: Context, max_attempts: int) -> dict[str, Any]:
    """A flaky step; a failure after retries is caught, then the run waits for "go"."""
    policy = RetryPolicy(max_attempts=max_attempts, initial_interval=0)
    try:
        outcome: dict[str, Any] = {"value": ctx.step(flaky, "ok", name="flaky", retry=policy)}
    except StepFailedError as exc:
        outcome = {"step": exc.step_name, "type": exc.error_type, "message": exc.message}
    LOG.append(outcome)
    ctx.wait_for_signal("go")
    return outcome


@weft.workflow(name="tests.retry_policy")
def retry_policy(ctx: Context, max_attempts: int, interval: float, non_retryable: bool) -> Any:
    """flaky() under a policy; ``non_retryable`` makes its ConnectionError final."""
    policy = RetryPolicy(
        max_attempts=max_attempts,
        initial_interval=interval,
        non_retryable=(ConnectionError,) if non_retryable else (),
    )
    return ctx.step(flaky, "ok", name="flaky", retry=policy)


@weft.workflow(name="tests.recorded_values")
def recorded_values(ctx: Context) -> dict[str, Any]:
    values = {"now": ctx.now().isoformat(), "uuid": str(ctx.uuid4()), "random": ctx.random()}
    LOG.append(values)
    ctx.wait_for_signal("go")
    return values


@weft.workflow(name="tests.echo")
def echo(ctx: Context, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@weft.workflow(name="tests.bad_step_result")
def bad_step_result(ctx: Context) -> Any:
    ctx.step(noop, name="fine")
    return ctx.step(make_object, name="make_object")


@weft.workflow(name="tests.fails")
def fails(ctx: Context) -> None:
    raise KeyError("no such thing")


def reserve_stock(order_id: int) -> dict[str, Any]:
    CALLS["reserve_stock"] += 1
    return {"order_id": order_id, "reserved": True}


@weft.workflow(name="tests.approve_order")
def approve_order(ctx: Context, order_id: int) -> dict[str, Any]:
    """the README's example workflow, as the WorkflowDriver docstring drives it."""
    ctx.step(reserve_stock, order_id)
    try:
        decision = ctx.wait_for_signal("decision", timeout=timedelta(days=3))
    except WaitTimeoutError:
        return {"status": "expired"}
    ctx.sleep(timedelta(minutes=5))
    return {"status": decision["status"]}


@weft.workflow(name="tests.long_step_name")
def long_step_name(ctx: Context, length: int) -> str:
    ctx.step(noop, name="n" * length)
    return "unreachable"


@weft.workflow(name="tests.long_ids_caught")
def long_ids_caught(ctx: Context) -> dict[str, Any]:
    """Catches the refusals of ids that are too long (a child id derived from this
    run's long id, an explicit one, a step name), then waits for "go": the turn
    after the signal replays the refusals and must raise them at the same places."""
    refused = []
    for call in (
        lambda: ctx.start_child("tests.child_add", 1),
        lambda: ctx.start_child("tests.child_add", 1, workflow_id="k" * 256),
        lambda: ctx.step(noop, name="n" * 256),
    ):
        try:
            call()
        except InvalidIdError as exc:
            refused.append(exc.what)
    ctx.wait_for_signal("go")
    handle = ctx.start_child("tests.child_add", 2, workflow_id="kid-of-a-long-id")
    return {"refused": refused, "result": handle.result()}


@weft.workflow(name="tests.child_after_steps")
def child_after_steps(ctx: Context, steps: int) -> dict[str, Any]:
    """``steps`` steps and a recorded value (buffered, not yet written), then a child
    with a derived id, whose ``seq`` is ``steps + 1``; a refusal is caught, then the
    run waits for "go" so the turn after the signal replays all of it."""
    for index in range(steps):
        ctx.step(noop, name=f"s{index}")
    ctx.now()
    try:
        child: str | None = ctx.start_child("tests.child_add", 1).id
    except InvalidIdError as exc:
        child = None
        LOG.append(exc.what)
    ctx.wait_for_signal("go")
    return {"child": child}


@weft.workflow(name="tests.recoverable")
def recoverable(ctx: Context) -> dict[str, Any]:
    """s0, a recorded time and uuid, s1, a consumed "go" signal, s2, s3; s2 raises
    while ``STATE["variant"]`` is "a" (the bug a fork runs again past, fixed)."""
    first = ctx.step(log_step, ctx.workflow_id, "s0", name="s0")
    when = ctx.now().isoformat()
    token = str(ctx.uuid4())
    ctx.step(log_step, ctx.workflow_id, "s1", name="s1")
    go = ctx.wait_for_signal("go")
    if STATE["variant"] == "a":
        ctx.step(fails_step, name="s2")
    ctx.step(log_step, ctx.workflow_id, "s2", name="s2")
    ctx.step(log_step, ctx.workflow_id, "s3", name="s3")
    return {"first": first, "when": when, "token": token, "go": go}


def fails_step() -> None:
    CALLS["fails_step"] += 1
    raise RuntimeError("the bug")


@weft.workflow(name="tests.tree")
def tree(ctx: Context, depth: int) -> Any:
    """A chain of ``depth`` nested children, each waiting on the next; the leaf
    waits for "release", then logs a step."""
    if depth > 1:
        return ctx.start_child("tests.tree", depth - 1).result()
    ctx.wait_for_signal("release")
    return ctx.step(log_step, ctx.workflow_id, "leaf", name="leaf")


# -- versions side by side and patching (docs/deploying-code.md) ----------------------


@weft.workflow(name="tests.versioned", version=1)
def versioned_v1(ctx: Context) -> dict[str, Any]:
    ctx.step(log_step, ctx.workflow_id, "v1-first", name="v1-first")
    ctx.wait_for_signal("go")
    ctx.step(log_step, ctx.workflow_id, "v1-last", name="v1-last")
    return {"code": 1, "version": ctx.workflow_version}


@weft.workflow(name="tests.versioned", version=2)
def versioned_v2(ctx: Context) -> dict[str, Any]:
    """Another order of operations: replaying a v1 history with it would diverge."""
    ctx.step(log_step, ctx.workflow_id, "v2-first", name="v2-first")
    ctx.step(log_step, ctx.workflow_id, "v2-second", name="v2-second")
    ctx.wait_for_signal("go")
    return {"code": 2, "version": ctx.workflow_version}


@weft.workflow(name="tests.patchable")
def patchable(ctx: Context) -> str:
    """``STATE["patch"]``: "none" (the code before the change), "patched" (the
    change behind ``ctx.patched``), "deprecated" (``ctx.deprecate_patch``), "new"
    (the patch call removed), or "reordered" (the change made without a patch)."""
    mode = STATE.get("patch", "none")
    ctx.step(log_step, ctx.workflow_id, "first", name="first")
    if mode == "patched":
        new = ctx.patched("add-extra")
    elif mode == "deprecated":
        ctx.deprecate_patch("add-extra")
        new = True
    else:
        new = mode in ("new", "reordered")
    if new:
        ctx.step(log_step, ctx.workflow_id, "extra", name="extra")
    ctx.wait_for_signal("go")
    ctx.step(log_step, ctx.workflow_id, "last", name="last")
    # Asked again: the same answer for the whole run, no second marker.
    again = ctx.patched("add-extra") if mode == "patched" else new
    return ("new" if new else "old") + ("" if again == new else "!")
