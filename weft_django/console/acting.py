"""The console's operations: the admin's code path, audited the same way.

``cancel``, ``suspend`` and ``resume`` take several runs, each its own
operation (:func:`weft_django.operations.batch`; ``cancel --children`` is
:func:`weft_django.recovery.cancel_tree` per run); ``retry`` and ``fork`` are
:mod:`weft_django.recovery`'s; ``signal`` is :func:`weft_django.operations.signal`.
Each is recorded with the actor (``--as USER``: a Django admin ``LogEntry``
for that user; else the OS user's name, in the log line and the run's error)
and the ``--reason``. ``update`` and ``query`` are the public verbs (an update
is application traffic, not an operator's change; a query reads).
"""

from __future__ import annotations

import getpass
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model

from .. import operations, recovery
from ..api.updates import query as query_run
from ..api.updates import update as update_run
from . import USAGE, ConsoleError, one_line

#: The operations that take several runs.
TRANSITIONS = ("cancel", "suspend", "resume")


@dataclass
class Outcome:
    """One run's outcome: done (with the new run for a retry or fork) or failed."""

    run: str
    done: bool
    detail: str
    error: BaseException | None = None
    new_run: str | None = None

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"run": self.run, "done": self.done, "detail": self.detail}
        if self.error is not None:
            found["error"] = type(self.error).__name__
        if self.new_run is not None:
            found["new_run"] = self.new_run
        return found


OUTCOME_COLUMNS = ["run", "done", "detail", "new_run"]


def actor(username: str | None) -> Any:
    """The user named ``username`` (``ConsoleError`` when there is none), or,
    without one, the OS user's login name (None when it cannot be read)."""
    if username is None:
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return None
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    if user is None:
        raise ConsoleError(f"--as: no user {username!r}", USAGE)
    return user


def json_argument(text: str | None, what: str) -> Any:
    """``text`` parsed as JSON (None when not given); ``ConsoleError`` (usage) otherwise."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConsoleError(f"{what} is not valid JSON: {exc}", USAGE) from None


def query_argument(text: str) -> Any:
    """A query argument: JSON when it parses as JSON, else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def transition(
    operation: str,
    run_ids: list[str],
    *,
    children: bool = False,
    reason: str | None,
    by: Any,
    using: str | None,
) -> list[Outcome]:
    """``operation`` (cancel, suspend, resume) on each run, each on its own."""
    if children and operation != "cancel":
        raise ConsoleError("--children applies to cancel only", USAGE)
    if not children:
        result = operations.batch(operation, run_ids, reason=reason, by=by, using=using)
        failed = dict(result.failed)
        return [
            Outcome(run_id, False, one_line(failed[run_id]), failed[run_id])
            if run_id in failed
            else Outcome(run_id, True, operations.DONE[operation])
            for run_id in run_ids
        ]
    outcomes = []
    for run_id in run_ids:
        try:
            tree = recovery.cancel_tree(run_id, reason=reason, by=by, using=using)
        except Exception as exc:
            outcomes.append(Outcome(run_id, False, one_line(exc), exc))
            continue
        descendants = len(tree.cancelled) - 1
        detail = f"cancelled with {descendants} descendant(s)"
        outcomes.append(Outcome(run_id, True, detail))
        outcomes += [Outcome(pk, False, one_line(error), error) for pk, error in tree.failed]
    return outcomes


def signal(
    run_id: str,
    name: str,
    payload: Any,
    *,
    signal_id: str | None,
    reason: str | None,
    by: Any,
    using: str | None,
) -> Outcome:
    operations.signal(run_id, name, payload, signal_id=signal_id, reason=reason, by=by, using=using)
    return Outcome(run_id, True, f"signal {name!r} stored")


def update(
    run_id: str,
    name: str,
    payload: Any,
    *,
    timeout: float | None,
    update_id: str | None,
    using: str | None,
) -> Any:
    """The update handler's answer."""
    return update_run(run_id, name, payload, timeout=timeout, update_id=update_id, using=using)


def query(run_id: str, name: str, args: list[str], *, using: str | None) -> Any:
    """The query handler's answer (each argument JSON, or text)."""
    return query_run(run_id, name, *[query_argument(arg) for arg in args], using=using)


def retry(
    run_id: str, *, new_id: str | None, reason: str | None, by: Any, using: str | None
) -> Outcome:
    new = recovery.retry(run_id, new_id=new_id, reason=reason, by=by, using=using)
    return Outcome(run_id, True, f"retried as {new}", new_run=new)


def fork(
    run_id: str,
    from_step: int,
    *,
    new_id: str | None,
    reason: str | None,
    by: Any,
    using: str | None,
) -> Outcome:
    new = recovery.fork(run_id, from_step, new_id=new_id, reason=reason, by=by, using=using)
    return Outcome(run_id, True, f"forked from step {from_step} as {new}", new_run=new)
