"""The ownership protocol (docs/ownership.md): its face to the rest of the package.

Everything outside ``weft_django.ownership`` (the runtime, the public verbs,
the worker, the admin, the commands) imports the protocol from here, and only
the names in ``__all__``; ``tests/test_architecture.py`` holds every module to
that. Inside, the protocol is organised by what the code does:

- :mod:`.modes`: one strategy class per ownership mode, chosen by a factory;
- :mod:`.claims`: per-workflow claims, their first claims and release rule;
- :mod:`.writes`: fenced writes, as transactions and as single statements;
- :mod:`.passes`: the renewal loop's scans and passes;
- :mod:`.leases`: engine rows and the single-row leases;
- :mod:`.gates`, :mod:`.clock`, :mod:`.locks`, :mod:`.metrics`: the boot
  gates, the database's clock, bounded lock waits, Prometheus metrics.

The names are loaded on first use, so importing a module that uses them (as
``import weft_django`` does) loads no models.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import metrics
    from .claims.results import Acquired, ClaimResult, LostRace
    from .claims.revoke import revoke_statement
    from .claims.served import Served
    from .clock import NOW_SQL, Clock, DbNow, SteadyClock, as_aware, db_now, seconds
    from .gates import MarkerResetRefused, raw_marker, read_marker, reset_marker
    from .leases.engines import engine_id_or_new, mark_disposing, mark_stopped, record_passes
    from .leases.singleton import LeaseRow, SingletonLease
    from .leases.state import LeaseState, lease_state_expression, live_engines
    from .locks import (
        MYSQL_LOCK_WAIT_TIMEOUT,
        OPERATOR_LOCK_WAIT,
        PASS_LOCK_WAIT,
        bounded_lock_wait,
        busy_as_typed_error,
    )
    from .modes import Ownership, ownership_class, ownership_for
    from .passes.outcomes import Outcome, PassResult
    from .passes.scans import (
        expired_holders,
        held_woken,
        ownerless_active,
        pending_due,
        pending_due_filter,
    )
    from .passes.signal_poll import has_buffered_signal, signal_poll_pass, signal_stranded
    from .passes.update_poll import has_pending_update, update_poll_pass, update_stranded
    from .writes.requests import (
        Checkpoint,
        Fence,
        Finish,
        Form,
        Park,
        SignalTake,
        Stamp,
        TakeSignal,
    )

# name -> the module (under this package) that defines it; "" for a submodule.
_FACE = {
    # Choosing the strategy of the configured mode; the ownership-mode marker
    "Ownership": "modes",
    "ownership_class": "modes",
    "ownership_for": "modes",
    "read_marker": "gates",
    "raw_marker": "gates",
    "reset_marker": "gates",
    "MarkerResetRefused": "gates",
    # Claims and their results
    "Acquired": "claims.results",
    "ClaimResult": "claims.results",
    "LostRace": "claims.results",
    "revoke_statement": "claims.revoke",
    "Served": "claims.served",
    # The database's clock
    "Clock": "clock",
    "DbNow": "clock",
    "NOW_SQL": "clock",
    "SteadyClock": "clock",
    "as_aware": "clock",
    "db_now": "clock",
    "seconds": "clock",
    # Engines and lease state
    "LeaseState": "leases.state",
    "lease_state_expression": "leases.state",
    "live_engines": "leases.state",
    "mark_disposing": "leases.engines",
    "mark_stopped": "leases.engines",
    "engine_id_or_new": "leases.engines",
    "record_passes": "leases.engines",
    "LeaseRow": "leases.singleton",
    "SingletonLease": "leases.singleton",
    # Lock waits
    "MYSQL_LOCK_WAIT_TIMEOUT": "locks",
    "OPERATOR_LOCK_WAIT": "locks",
    "PASS_LOCK_WAIT": "locks",
    "bounded_lock_wait": "locks",
    "busy_as_typed_error": "locks",
    # Passes
    "Outcome": "passes.outcomes",
    "PassResult": "passes.outcomes",
    "expired_holders": "passes.scans",
    "held_woken": "passes.scans",
    "ownerless_active": "passes.scans",
    "pending_due": "passes.scans",
    "pending_due_filter": "passes.scans",
    "has_buffered_signal": "passes.signal_poll",
    "signal_poll_pass": "passes.signal_poll",
    "signal_stranded": "passes.signal_poll",
    "has_pending_update": "passes.update_poll",
    "update_poll_pass": "passes.update_poll",
    "update_stranded": "passes.update_poll",
    # Fenced writes: the token and the one-statement requests
    "Fence": "writes.requests",
    "Form": "writes.requests",
    "Stamp": "writes.requests",
    "Checkpoint": "writes.requests",
    "Park": "writes.requests",
    "Finish": "writes.requests",
    "TakeSignal": "writes.requests",
    "SignalTake": "writes.requests",
    # The cursor of the hot statements (prepared where the connection allows)
    "hot_cursor": "writes.cursor",
    # Metrics (a module: weft's Prometheus registry)
    "metrics": "",
}

__all__ = [  # noqa: RUF022 (the same order as _FACE)
    "Ownership",
    "ownership_class",
    "ownership_for",
    "read_marker",
    "raw_marker",
    "reset_marker",
    "MarkerResetRefused",
    "Acquired",
    "ClaimResult",
    "LostRace",
    "revoke_statement",
    "Served",
    "Clock",
    "DbNow",
    "NOW_SQL",
    "SteadyClock",
    "as_aware",
    "db_now",
    "seconds",
    "LeaseState",
    "lease_state_expression",
    "live_engines",
    "mark_disposing",
    "mark_stopped",
    "engine_id_or_new",
    "record_passes",
    "LeaseRow",
    "SingletonLease",
    "MYSQL_LOCK_WAIT_TIMEOUT",
    "OPERATOR_LOCK_WAIT",
    "PASS_LOCK_WAIT",
    "bounded_lock_wait",
    "busy_as_typed_error",
    "Outcome",
    "PassResult",
    "expired_holders",
    "held_woken",
    "ownerless_active",
    "pending_due",
    "pending_due_filter",
    "has_buffered_signal",
    "signal_poll_pass",
    "signal_stranded",
    "has_pending_update",
    "update_poll_pass",
    "update_stranded",
    "Fence",
    "Form",
    "Stamp",
    "Checkpoint",
    "Park",
    "Finish",
    "TakeSignal",
    "SignalTake",
    "hot_cursor",
    "metrics",
]


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not module:
        value = import_module(f"{__name__}.{name}")
    else:
        value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
