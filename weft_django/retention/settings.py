"""``WEFT["RETENTION"]``: how long finished runs and stopped engines are kept
(docs/retention.md).

Read lazily on every call through :func:`weft_django.conf.raw_settings`, never
at import time. Durations are seconds (int/float) or a ``timedelta``; ``None``
keeps that kind of row forever. Problems are ``weft.E016`` (a bad value) and
``weft.E017`` (not a dict, an unknown key, or a status that is not terminal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..conf import (
    PRUNE_BATCH,
    PRUNE_MAX_BATCH,
    Problem,
    check_batch_size,
    duration_seconds,
    raw_settings,
)
from ..exceptions import WeftConfigurationError
from ..models import TERMINAL_STATUSES, RunStatus

DAY = 24 * 3600.0

#: One key per terminal status (upper case), each a retention; ``None`` keeps forever.
STATUS_KEYS = {str(status).upper(): str(status) for status in TERMINAL_STATUSES}

DEFAULTS: dict[str, Any] = {
    "COMPLETED": timedelta(days=7),
    "FAILED": timedelta(days=30),
    "CANCELLED": timedelta(days=30),
    "TIMED_OUT": timedelta(days=30),
    # Stopped engine rows (the admin's history of who held what), and dead ones
    # (lease expired that long ago, never stopped).
    "ENGINES": timedelta(days=7),
    # Stopped engine rows of Celery passes (their summaries are PassSummary rows).
    "CELERY_ENGINES": timedelta(hours=1),
    # The optional worker pass: seconds between passes; None (default) is off.
    "WORKER_INTERVAL": None,
    # Runs per batch (one short transaction each) of the worker pass and the command.
    "BATCH_SIZE": PRUNE_BATCH,
}
#: The worker pass runs at most this often.
MIN_WORKER_INTERVAL = 1.0


@dataclass(frozen=True)
class RetentionPolicy:
    """Validated retention: seconds per terminal status and for stopped engines."""

    statuses: dict[str, float | None] = field(default_factory=dict)
    engines: float | None = 7 * DAY
    celery_engines: float | None = 3600.0
    worker_interval: float | None = None
    batch_size: int = PRUNE_BATCH

    def pruned_statuses(self) -> list[str]:
        """The statuses that have a retention (are ever pruned), in a fixed order."""
        return [s for s in STATUS_KEYS.values() if self.statuses.get(s) is not None]


def _retention_problem(key: str, value: Any) -> Problem | None:
    if value is None:
        return None
    seconds = duration_seconds(value)
    if seconds is None or seconds < 0:
        return Problem(
            "weft.E016",
            f"WEFT['RETENTION'][{key!r}] must be None (keep forever), or a non-negative, "
            f"finite number of seconds (at most 100 years) or a timedelta, got {value!r}.",
            f"Set it to e.g. timedelta(days={int(duration_seconds(DEFAULTS[key]) or 0) // 86400}).",
        )
    return None


def problems(value: Any = ...) -> list[Problem]:
    """Every problem with ``WEFT["RETENTION"]`` (empty when valid or absent)."""
    if value is ...:
        try:
            value = raw_settings().get("RETENTION")
        except WeftConfigurationError:
            return []  # settings.WEFT itself is wrong: weft.E001 says so
    if value is None:
        return []
    if not isinstance(value, dict):
        return [
            Problem(
                "weft.E017",
                f"WEFT['RETENTION'] must be a dict, not {type(value).__name__}.",
                "Set e.g. WEFT['RETENTION'] = {'COMPLETED': timedelta(days=7)}.",
            )
        ]
    found: list[Problem] = []
    statuses = {str(s).upper() for s in RunStatus}
    for key in value:
        if key in DEFAULTS:
            continue
        if isinstance(key, str) and key.upper() in statuses:
            why = f"{key!r} is not a terminal status: only finished runs are ever pruned"
        else:
            why = f"{key!r} is not a retention setting"
        found.append(
            Problem(
                "weft.E017",
                f"Unknown WEFT['RETENTION'] key: {why}.",
                f"Valid keys are: {', '.join(DEFAULTS)}.",
            )
        )
    merged = {**DEFAULTS, **value}
    for key in (*STATUS_KEYS, "ENGINES", "CELERY_ENGINES"):
        problem = _retention_problem(key, merged[key])
        if problem is not None:
            found.append(problem)
    interval = merged["WORKER_INTERVAL"]
    if interval is not None:
        seconds = duration_seconds(interval)
        if seconds is None or seconds < MIN_WORKER_INTERVAL:
            found.append(
                Problem(
                    "weft.E016",
                    "WEFT['RETENTION']['WORKER_INTERVAL'] must be None (no worker pass) or "
                    f"at least {MIN_WORKER_INTERVAL:g} second(s) or a timedelta, got {interval!r}.",
                    "Set it to e.g. 300 (a pass every five minutes), or leave it out.",
                )
            )
    try:
        check_batch_size(
            merged["BATCH_SIZE"], "WEFT['RETENTION']['BATCH_SIZE']", maximum=PRUNE_MAX_BATCH
        )
    except WeftConfigurationError as exc:
        found.append(Problem("weft.E016", str(exc), f"Set it to e.g. {PRUNE_BATCH}."))
    return found


def policy(value: Any = ...) -> RetentionPolicy:
    """The validated policy; :class:`WeftConfigurationError` when invalid."""
    if value is ...:
        value = raw_settings().get("RETENTION")
    found = problems(value)
    if found:
        lines = "; ".join(f"{p.msg} ({p.id}; hint: {p.hint})" for p in found)
        raise WeftConfigurationError(f"Invalid WEFT['RETENTION']: {lines}")
    merged = {**DEFAULTS, **(value or {})}
    return RetentionPolicy(
        statuses={
            status: duration_seconds(merged[key]) if merged[key] is not None else None
            for key, status in STATUS_KEYS.items()
        },
        engines=duration_seconds(merged["ENGINES"]) if merged["ENGINES"] is not None else None,
        celery_engines=(
            duration_seconds(merged["CELERY_ENGINES"])
            if merged["CELERY_ENGINES"] is not None
            else None
        ),
        worker_interval=(
            duration_seconds(merged["WORKER_INTERVAL"])
            if merged["WORKER_INTERVAL"] is not None
            else None
        ),
        batch_size=int(merged["BATCH_SIZE"]),
    )
