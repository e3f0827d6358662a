"""The replay check before a deploy: stored histories against the code as it is now.

Each run's recorded history is replayed read-only, as queries replay it
(:class:`~.query.ReplayTurn`: no step runs, every write is refused, and the
replay stops at the first operation the history has no outcome for), inside
a transaction that is rolled back, so nothing is written even by workflow
code that touches the database outside its steps. The answer per run is
``ok``, the first divergence (what the history recorded, what the code asks
for, at which event), or why it could not be replayed here (its version is
not registered in this code: its runs would not be served once it ships).

``manage.py weft_replay`` is a thin command over :func:`check_runs` and
:func:`export_history`; ``weft_django.testing.replay`` replays an exported
history (a file or a dict) in a unit test with :func:`replay_history`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count

from ..exceptions import NonDeterminismError, PayloadError
from ..models import RunStatus, WorkflowEvent, WorkflowRun, db_for
from . import registry
from .context import Context
from .port import Event, StopReplay
from .query import ReplayTurn
from .replay import Replay, undecodable_history

#: What the check replays by default: the runs in flight (a suspended run is
#: replayed too: the check tells whether a fix lets it resume). Pending runs
#: have no history: :func:`unserved_pending` checks their versions.
IN_FLIGHT = (RunStatus.RUNNING, RunStatus.WAITING, RunStatus.SUSPENDED)
#: The format tag of an exported history.
HISTORY_FORMAT = "weft-history"
#: The run fields an exported history carries.
HISTORY_RUN_FIELDS = (
    "id",
    "workflow_name",
    "workflow_version",
    "status",
    "args",
    "kwargs",
    "parent_id",
)


def _bad_history(reason: str) -> PayloadError:
    """A history given to :func:`~weft_django.testing.replay` that is not one
    ``manage.py weft_replay --export`` writes."""
    return PayloadError("history", reason)


@dataclass(frozen=True)
class ReplayOutcome:
    """The replay check's answer for one run."""

    run_id: str
    workflow_name: str
    workflow_version: int
    status: str
    #: None: the history replays against the code.
    divergence: NonDeterminismError | None = None
    #: Why the run could not be replayed here at all (None: it was).
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.divergence is None and self.problem is None

    def line(self) -> str:
        """One line for the command's output."""
        head = f"{self.run_id} {self.workflow_name} v{self.workflow_version} ({self.status}):"
        if self.divergence is not None:
            found, expected = self.divergence.found, self.divergence.expected
            return (
                f"{head} DIVERGES at event #{self.divergence.seq}: history says {found}, "
                f"the code asks for {expected}"
            )
        if self.problem is not None:
            return f"{head} CANNOT REPLAY: {self.problem}"
        return f"{head} ok"


def replay_history(
    run: dict[str, Any],
    events: list[Event],
    definition: registry.WorkflowDefinition,
    *,
    using: str | None = None,
) -> NonDeterminismError | None:
    """Replay ``events`` (the run's history) with ``definition``'s code, read-only;
    the first divergence, or None. ``run`` holds :data:`HISTORY_RUN_FIELDS`."""
    replay = Replay(run["id"], list(events), read_only=True)
    failure: BaseException | None = None
    stopped = False
    try:
        if replay.poisoned is None:
            definition.fn(
                Context(ReplayTurn(run, definition, db_for(using)), replay),
                *run.get("args") or [],
                **run.get("kwargs") or {},
            )
    except StopReplay:
        stopped = True  # the code asks for more than was recorded: a run in flight
    except NonDeterminismError:
        pass  # recorded on the replay (poisoned)
    except Exception as exc:
        failure = exc
    if replay.poisoned is None and not stopped:
        replay.check_replayed_to_end(failure)
    if replay.poisoned is None and stopped and run.get("status") == RunStatus.COMPLETED:
        # The run returned after its last event; the code now goes on.
        return NonDeterminismError(
            run["id"],
            len(replay.events),
            "more operations",
            "the end of the history (the run completed there)",
        )
    return replay.poisoned


def _events(run_id: str, using: str) -> list[Event]:
    rows = (
        WorkflowEvent.objects.using(using)
        .filter(run_id=run_id)
        .order_by("seq")
        .values_list("seq", "kind", "name", "result", "error")
    )
    return [Event(*row) for row in rows]


def check_run(run: dict[str, Any], *, using: str | None = None) -> ReplayOutcome:
    """The replay check of one run (a row of :data:`HISTORY_RUN_FIELDS`)."""
    using = db_for(using)
    outcome = ReplayOutcome(run["id"], run["workflow_name"], run["workflow_version"], run["status"])
    name, version = run["workflow_name"], run["workflow_version"]
    if not registry.is_registered(name, version):
        have = registry.registered_versions().get(name)
        known = f"registered versions: {', '.join(map(str, have))}" if have else "not registered"
        problem = f"{name} v{version} is not registered in this code ({known})"
        return _with(outcome, problem=problem)
    if run["status"] == RunStatus.PENDING:
        return outcome  # no history yet: it starts on this code
    events = _events(run["id"], using)
    unreadable = undecodable_history(run, events)
    if unreadable is not None:
        return _with(outcome, problem=str(unreadable))
    definition = registry.get(name, version)
    with transaction.atomic(using=using):
        divergence = replay_history(run, events, definition, using=using)
        transaction.set_rollback(True, using=using)
    return _with(outcome, divergence=divergence)


def _with(outcome: ReplayOutcome, **changes: Any) -> ReplayOutcome:
    return ReplayOutcome(**{**outcome.__dict__, **changes})


def runs_to_check(
    *,
    workflows: Sequence[str] = (),
    statuses: Sequence[str] = IN_FLIGHT,
    run_ids: Sequence[str] = (),
    limit: int | None = None,
    using: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The runs the check replays: ``run_ids`` if given, else the runs of
    ``statuses`` (of ``workflows``, if given), the most recently updated first,
    at most ``limit``. The ids are read first, then each run as it is checked."""
    query = WorkflowRun.objects.using(db_for(using))
    if run_ids:
        query = query.filter(pk__in=list(run_ids))
    else:
        query = query.filter(status__in=list(statuses))
    if workflows:
        query = query.filter(workflow_name__in=list(workflows))
    ids = query.order_by("-updated_at", "pk").values_list("pk", flat=True)
    for run_id in list(ids[:limit] if limit is not None else ids):
        run = query.filter(pk=run_id).values(*HISTORY_RUN_FIELDS).first()
        if run is not None:  # not purged since
            yield run


def unserved_pending(
    *, workflows: Sequence[str] = (), using: str | None = None
) -> list[tuple[str, int, int]]:
    """(name, version, how many) of the pending runs whose version this code
    does not register: they have no history to replay, but once this code is
    the only code deployed no worker would take them."""
    query = WorkflowRun.objects.using(db_for(using)).filter(status=RunStatus.PENDING)
    if workflows:
        query = query.filter(workflow_name__in=list(workflows))
    pairs = (
        query.order_by()
        .values_list("workflow_name", "workflow_version")
        .annotate(n=Count("pk"))
        .order_by("workflow_name", "workflow_version")
    )
    return [
        (name, version, n)
        for name, version, n in pairs
        if not registry.is_registered(name, version)
    ]


def check_runs(
    runs: Iterable[dict[str, Any]],
    *,
    using: str | None = None,
    report: Callable[[ReplayOutcome], None] | None = None,
) -> list[ReplayOutcome]:
    """:func:`check_run` of each run; ``report`` is called with each answer as it comes."""
    outcomes = []
    for run in runs:
        outcome = check_run(run, using=using)
        if report is not None:
            report(outcome)
        outcomes.append(outcome)
    return outcomes


def export_history(run_id: str, *, using: str | None = None) -> dict[str, Any] | None:
    """The run's history as a JSON-ready dict (None: no such run)."""
    using = db_for(using)
    run = WorkflowRun.objects.using(using).filter(pk=run_id).values(*HISTORY_RUN_FIELDS).first()
    if run is None:
        return None
    events = [
        {"seq": e.seq, "kind": e.kind, "name": e.name, "result": e.result, "error": e.error}
        for e in _events(run_id, using)
    ]
    return {"format": HISTORY_FORMAT, "run": run, "events": events}


def parse_history(history: Any) -> tuple[dict[str, Any], list[Event]]:
    """An exported history (the dict :func:`export_history` gives) -> (run, events)."""
    if not isinstance(history, dict) or history.get("format") != HISTORY_FORMAT:
        raise _bad_history(
            f"not a weft history (a dict with 'format': {HISTORY_FORMAT!r}, as "
            "manage.py weft_replay --export writes)"
        )
    run, events = history.get("run"), history.get("events")
    if not isinstance(run, dict) or not isinstance(events, list):
        raise _bad_history("a weft history has a 'run' object and an 'events' list")
    missing = [name for name in ("id", "workflow_name", "workflow_version") if name not in run]
    if missing:
        raise _bad_history(f"the history's run lacks {', '.join(missing)}")
    try:
        parsed = [
            Event(int(e["seq"]), str(e["kind"]), str(e["name"]), e.get("result"), e.get("error"))
            for e in events
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad_history(f"an event of the history is malformed: {exc!r}") from None
    return run, parsed
