"""Running a Worker in-process for tests: workflows, a pass recorder, fixtures' helpers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connections

import weft_django as weft
from weft_django import Context
from weft_django.models import RunStatus, WorkflowRun
from weft_django.ownership.passes.outcomes import PassResult
from weft_django.worker import Worker

RENEW = 0.2


def _noop(index: int) -> int:
    return index


@weft.workflow(name="tw.steps")
def tw_steps(ctx: Context, n: int = 3) -> int:
    for index in range(n):
        ctx.step(_noop, index, name=f"n{index}")
    return n


@weft.workflow(name="tw.waiter")
def tw_waiter(ctx: Context) -> Any:
    ctx.step(_noop, 0, name="before")
    return ctx.wait_for_signal("go")


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "it") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def completed(run_ids: list[str]) -> bool:
    return WorkflowRun.objects.filter(pk__in=run_ids, status=RunStatus.COMPLETED).count() == len(
        run_ids
    )


class Passes:
    """An ``on_pass`` callback that keeps (thread name, result) in arrival order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, PassResult]] = []

    def __call__(self, result: PassResult) -> None:
        with self.lock:
            self.seen.append((threading.current_thread().name, result))

    def named(self, name: str) -> list[PassResult]:
        with self.lock:
            return [result for _thread, result in self.seen if result.name == name]

    def by_thread(self, thread: str) -> list[str]:
        with self.lock:
            return [result.name for name, result in self.seen if name == thread]


class Running:
    """A Worker running in a thread of its own."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.returned: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="test-worker-main", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            self.returned = self.worker.run()
        except BaseException as exc:
            self.error = exc
        finally:
            connections.close_all()

    def wait_started(self) -> Running:
        engine = self.worker.engine
        wait_for(lambda: engine.started or self.error or not self.thread.is_alive(), 10, "boot")
        if self.error is not None:
            raise self.error
        return self

    def stop(self, timeout: float = 20.0) -> None:
        self.worker.stop()
        self.join(timeout)

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the worker did not stop"
        if self.error is not None:
            raise self.error
