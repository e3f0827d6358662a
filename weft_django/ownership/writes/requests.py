"""The typed requests of the fenced writes: who writes, and what.

A :class:`Fence` is the proof a write must carry: this engine holds run
``workflow_id`` at ``epoch`` (its claim, or the global lease in mode
``lease``). The one-statement writes each take a fence and one request, built
by the runtime (``runtime/writes.py``) and read by the statement builders
(:mod:`.single`, :mod:`.wake`):

- :class:`Checkpoint`: a step's events; the run's first write of a turn
  also moves it to ``running``;
- :class:`Park`: the events and the move to ``waiting``;
- :class:`Finish`: the last events, the terminal status, the claim's release;
- :class:`TakeSignal`: a woken turn's consume of a buffered signal.

A park or finish of a turn that holds flow-control slots frees them in the
same write (``free_slots``).

Which of them a strategy can write in one statement it says once, as a set
of :class:`Form` (``Ownership.one_statement``; per database,
:func:`forms_on`); the runtime writes the others as a fenced transaction.
Event rows are tuples in :data:`EVENT_COLUMNS` order, JSON encoded as text.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

EVENT_COLUMNS = (
    "run_id",
    "seq",
    "kind",
    "name",
    "result",
    "error",
    "engine_id",
    "epoch",
    "created_at",
)

#: One event as a row of :data:`EVENT_COLUMNS` (JSON encoded as text).
EventRow = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Fence:
    """The fencing token of an owner's writes: engine ``engine_id`` holds run
    ``workflow_id`` at ``epoch``. Every fenced write proves it in its own
    transaction or statement, or writes nothing."""

    workflow_id: str
    engine_id: str
    epoch: int

    def params(self) -> list[Any]:
        """The SQL parameters of a check ``workflow_id = %s AND holder_id = %s
        AND epoch = %s``."""
        return [self.workflow_id, self.engine_id, self.epoch]


@dataclass(frozen=True, slots=True)
class Stamp:
    """The time a statement stamps the run with: ``sql`` for the database's
    "now" when the engine runs on the database clock (``clock_timestamp()``);
    None: ``now()``, read only by a statement that needs it (an injected clock,
    a test time offset), and passed as a parameter."""

    sql: str | None
    now: Callable[[], datetime]

    def sql_and_params(self) -> tuple[str, list[Any]]:
        """SQL for "now" and its parameters: ``sql`` as is, else ``%s`` and ``now()``."""
        if self.sql is None:
            return "%s", [self.now()]
        return self.sql, []

    def value(self) -> datetime | None:
        """The time as a value (None: the database's own "now")."""
        return None if self.sql else self.now()


class Form(enum.Enum):
    """A fenced write that has a one-statement form."""

    CHECKPOINT = "checkpoint"
    #: A checkpoint that also moves the run to ``running`` (its first write of a turn).
    CHECKPOINT_RUNNING = "checkpoint-running"
    PARK = "park"
    FINISH = "finish"
    TAKE_SIGNAL = "take-signal"


#: The one-statement forms of each database (by Django's ``connection.vendor``).
FORMS_BY_VENDOR: dict[str, frozenset[Form]] = {
    "postgresql": frozenset(Form),
    "sqlite": frozenset({Form.CHECKPOINT}),
    "mysql": frozenset({Form.CHECKPOINT}),
}


def forms_on(vendor: str) -> frozenset[Form]:
    """The one-statement forms the database ``vendor`` has (none: unknown)."""
    return FORMS_BY_VENDOR.get(vendor, frozenset())


class NoOneStatementForm(NotImplementedError):
    """A one-statement write was asked of a strategy or database without that
    form (the caller should have checked ``Ownership.one_statement``)."""

    def __init__(self, form: Form, where: str) -> None:
        super().__init__(f"{where} has no one-statement {form.value}")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A step's checkpoint: the events ``rows``. ``mark_running``: also the
    run's first write of the turn, which moves it to ``running`` (``status``,
    ``started_at`` if unset, ``updated_at``, ``waiting_on`` cleared, and
    ``wake_at``: the execution deadline, or None)."""

    rows: Sequence[EventRow]
    mark_running: bool = False
    wake_at: datetime | None = None

    @property
    def form(self) -> Form:
        return Form.CHECKPOINT_RUNNING if self.mark_running else Form.CHECKPOINT


@dataclass(frozen=True, slots=True)
class Park:
    """A turn's park: its events ``rows``, and the run moved to ``waiting``
    (``status``, ``waiting_on``, ``wake_at``, ``updated_at``, ``started_at``
    if unset); its ``wake_hint_at`` cleared only if it is still ``hint_seen``,
    the hint the turn answered (None: left as is)."""

    rows: Sequence[EventRow]
    waiting_on_json: str
    wake_at: datetime | None
    hint_seen: datetime | None
    stamp: Stamp
    #: Also free the flow-control slots of the turn (its run, engine and epoch).
    free_slots: bool = False

    form = Form.PARK


@dataclass(frozen=True, slots=True)
class Finish:
    """A run's terminal commit: its last events ``rows``; the run's ``status``,
    ``result`` and ``error`` (JSON as text), ``waiting_on``, ``wake_at`` and
    ``wake_hint_at`` cleared, ``updated_at``, ``finished_at`` and ``started_at``
    if unset; the claim released as ended; its open update requests rejected
    (their responses kept ``response_ttl`` seconds); and the parent's wake
    hint set when there is a parent (``parent_id``, else "")."""

    rows: Sequence[EventRow]
    status: str
    result_json: str | None
    error_json: str | None
    parent_id: str
    response_ttl: float
    stamp: Stamp
    #: Also free the flow-control slots of the turn (its run, engine and epoch).
    free_slots: bool = False

    form = Form.FINISH


@dataclass(frozen=True, slots=True)
class TakeSignal:
    """A woken turn's consume: the oldest unconsumed signal ``name`` of the run,
    recorded as the event ``seq`` (created at ``created_at``) after the turn's
    pending events ``rows``. ``mark_running``: also the run's first write of
    the turn (as :class:`Checkpoint`, ``wake_at`` its execution deadline)."""

    name: str
    seq: int
    rows: Sequence[EventRow]
    created_at: datetime
    mark_running: bool
    wake_at: datetime | None
    stamp: Stamp

    form = Form.TAKE_SIGNAL


@dataclass(frozen=True, slots=True)
class SignalTake:
    """What a :class:`TakeSignal` did: ``held`` the claim (else nothing was
    written); ``taken`` the oldest unconsumed signal of the name, whose
    ``payload`` is then recorded as the ``signal`` event."""

    held: bool
    taken: bool
    payload: Any = None
