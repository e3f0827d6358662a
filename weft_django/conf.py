"""Settings: the ``WEFT`` dict, read lazily on every access, with typed defaults.

Reading goes through :func:`get_settings`, which returns an immutable
:class:`WeftSettings` built from ``django.conf.settings.WEFT`` at call time, so
``override_settings(WEFT=...)`` works and nothing is read at import time.
Durations accept seconds (int/float) or a ``timedelta``.

Validation runs once per change of ``settings.WEFT``, not on every call (the
runtime reads settings on every step): the validated value is cached against
the dict itself and a copy of its items, so replacing the dict or changing it
in place is seen at the next call; Django's ``setting_changed`` signal
(``override_settings``) and :func:`clear_cache` drop the cache. Invalid
settings are never cached: every call raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .exceptions import WeftConfigurationError

# The ownership modes: the one spelling of each name, the vocabulary of
# WEFT["OWNERSHIP"]. What a mode does lives in its strategy class
# (weft_django.ownership.modes), which takes its name from here and is chosen
# once at boot; settings only validate the name (tests/test_mode_names.py).
WORKFLOW_LEASE = "workflow-lease"
GLOBAL_LEASE = "lease"
NO_OWNERSHIP = "none"
MODES = (WORKFLOW_LEASE, GLOBAL_LEASE, NO_OWNERSHIP)

DURATION_KEYS = (
    "CLAIM_TTL",
    "CLAIM_RENEW_INTERVAL",
    "LEASE_TTL",
    "LEASE_RENEW_INTERVAL",
    "TICK_INTERVAL",
    "UPDATE_RESPONSE_TTL",
    "IDLE_IN_TRANSACTION_TIMEOUT",
)

DEFAULTS: dict[str, Any] = {
    "OWNERSHIP": MODES[0],
    "CLAIM_TTL": 30.0,
    "CLAIM_RENEW_INTERVAL": 5.0,
    "LEASE_TTL": 30.0,
    "LEASE_RENEW_INTERVAL": 5.0,
    "TICK_INTERVAL": 0.25,
    "UPDATE_RESPONSE_TTL": 300.0,
    "MAX_PAYLOAD_BYTES": 262144,
    "NOTIFY": True,
    "IDLE_IN_TRANSACTION_TIMEOUT": 30.0,
    # Validated by weft_django.retention.settings (weft.E016/E017), not here.
    "RETENTION": None,
    # Validated by weft_django.schedules.declare (weft.E030-E032), not here.
    "SCHEDULES": None,
    # Validated by weft_django.flow.settings (weft.E040-E045), not here.
    "QUEUES": None,
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the settings, shared by system checks and boot."""

    id: str
    msg: str
    hint: str


@dataclass(frozen=True)
class Timing:
    """A lease's TTL and renew interval, and the judgments made from them.

    The one home of the expiry rule: a holder is expired when its lease ended
    more than ``expiry_grace`` (2 x renew interval) before the database's now,
    strictly.
    """

    ttl: float
    renew_interval: float

    @property
    def expiry_grace(self) -> float:
        """Seconds past ``expires_at`` before a holder counts as expired (2 x renew)."""
        return 2 * self.renew_interval

    @property
    def cooldown_cap(self) -> float:
        """The longest anti-thrash cooldown after a lost claim (4 x TTL)."""
        return 4 * self.ttl

    def cutoff(self, now: datetime) -> datetime:
        """A lease that ends before this instant is expired at ``now``."""
        return now - timedelta(seconds=self.expiry_grace)

    def is_expired(self, expires_at: datetime, now: datetime) -> bool:
        """``expires_at + 2 x renew < now``, strictly."""
        return expires_at < self.cutoff(now)


@dataclass(frozen=True)
class WeftSettings:
    ownership: str
    claim_ttl: float
    claim_renew_interval: float
    lease_ttl: float
    lease_renew_interval: float
    tick_interval: float
    update_response_ttl: float
    max_payload_bytes: int
    notify: bool
    idle_in_transaction_timeout: float = 30.0

    @property
    def claim_timing(self) -> Timing:
        """Per-workflow claims and the engine leases they live on."""
        return Timing(self.claim_ttl, self.claim_renew_interval)

    @property
    def lease_timing(self) -> Timing:
        """The store-wide lease of mode ``lease``."""
        return Timing(self.lease_ttl, self.lease_renew_interval)


def raw_settings() -> dict[str, Any]:
    """``settings.WEFT`` as it is now (``{}`` when unset); not validated."""
    return _raw()


def _raw() -> dict[str, Any]:
    value = getattr(settings, "WEFT", None)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WeftConfigurationError(f"settings.WEFT must be a dict, not {type(value).__name__}.")
    return value


# Lower bounds: below these a worker would spin on the database, not wait.
MIN_SECONDS = {
    "TICK_INTERVAL": 0.01,
    "CLAIM_RENEW_INTERVAL": 0.1,
    "LEASE_RENEW_INTERVAL": 0.1,
}

# Batch sizes: each limit has one name here, and check_batch_size checks them all.
#: Runs per retention batch by default (``WEFT["RETENTION"]["BATCH_SIZE"]``, the
#: ``prune_pass`` task and its beat entry, ``manage.py weft_prune``).
PRUNE_BATCH = 500
#: The largest retention batch (one transaction each, which must stay short).
PRUNE_MAX_BATCH = 10_000
#: Runs per store-wide pass (a Celery beat task) by default.
PASS_BATCH = 500
#: The largest batch one store-wide pass may select.
PASS_MAX_BATCH = 100_000


def check_batch_size(value: Any, what: str, *, maximum: int) -> int:
    """``value`` as a batch size from 1 to ``maximum``; :class:`WeftConfigurationError`
    (naming ``what``) otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WeftConfigurationError(f"{what} must be an integer, got {value!r}.")
    if not 1 <= value <= maximum:
        raise WeftConfigurationError(f"{what} must be from 1 to {maximum}, got {value}.")
    return value


# Larger payloads belong in your own tables (or object storage), not in run history.
MAX_PAYLOAD_LIMIT = 64 * 1024 * 1024

# Longer durations could not be added to a timestamp (datetime overflows past
# year 9999); nothing in weft needs more than a century.
MAX_DURATION_SECONDS = 100 * 365 * 24 * 3600.0


def duration_seconds(value: Any) -> float | None:
    """Seconds of a duration setting, or None when it is not a usable duration."""
    if isinstance(value, bool):
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:
            return None
    else:
        return None
    if not math.isfinite(seconds) or seconds > MAX_DURATION_SECONDS:
        return None
    return seconds


def problems(raw: dict[str, Any] | None = None) -> list[Problem]:
    """Every problem with ``settings.WEFT`` (empty when valid)."""
    try:
        raw = _raw() if raw is None else raw
    except WeftConfigurationError as exc:
        return [Problem("weft.E001", str(exc), "Set WEFT = {...} in your settings.")]
    found: list[Problem] = []
    unknown = sorted(str(key) for key in raw if key not in DEFAULTS)
    if unknown:
        found.append(
            Problem(
                "weft.E002",
                f"Unknown WEFT setting(s): {', '.join(unknown)}.",
                f"Valid keys are: {', '.join(DEFAULTS)}.",
            )
        )
    merged = {**DEFAULTS, **raw}
    mode = merged["OWNERSHIP"]
    if mode not in MODES:
        found.append(
            Problem(
                "weft.E003",
                f"WEFT['OWNERSHIP'] is {mode!r}, which is not an ownership mode.",
                f"Use one of {', '.join(repr(m) for m in MODES)}.",
            )
        )
    durations: dict[str, float] = {}
    for key in DURATION_KEYS:
        seconds = duration_seconds(merged[key])
        if seconds is None or seconds <= 0:
            found.append(
                Problem(
                    "weft.E004",
                    f"WEFT[{key!r}] must be a positive, finite number of seconds (at most "
                    f"100 years) or a timedelta, got {merged[key]!r}.",
                    f"Set WEFT[{key!r}] to e.g. {DEFAULTS[key]!r}.",
                )
            )
        elif seconds < MIN_SECONDS.get(key, 0.0):
            found.append(
                Problem(
                    "weft.E009",
                    f"WEFT[{key!r}] is {seconds:g}s, below its lower bound of "
                    f"{MIN_SECONDS[key]:g}s.",
                    f"Set WEFT[{key!r}] to e.g. {DEFAULTS[key]!r}.",
                )
            )
        else:
            durations[key] = seconds
    for ttl_key, renew_key in (
        ("CLAIM_TTL", "CLAIM_RENEW_INTERVAL"),
        ("LEASE_TTL", "LEASE_RENEW_INTERVAL"),
    ):
        if ttl_key not in durations or renew_key not in durations:
            continue
        ttl, renew = durations[ttl_key], durations[renew_key]
        if renew >= ttl:
            found.append(
                Problem(
                    "weft.E005",
                    f"WEFT[{renew_key!r}] ({renew:g}s) must be shorter than "
                    f"WEFT[{ttl_key!r}] ({ttl:g}s).",
                    f"Renew well within the TTL: e.g. {renew_key}={ttl / 6:g} for "
                    f"{ttl_key}={ttl:g}.",
                )
            )
        elif ttl < 3 * renew:
            found.append(
                Problem(
                    "weft.E006",
                    f"WEFT[{ttl_key!r}] ({ttl:g}s) must be at least 3 x "
                    f"WEFT[{renew_key!r}] ({renew:g}s), so one late renewal never "
                    "loses a claim.",
                    f"Raise {ttl_key} to at least {3 * renew:g} or lower {renew_key}.",
                )
            )
    size = merged["MAX_PAYLOAD_BYTES"]
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_PAYLOAD_LIMIT:
        found.append(
            Problem(
                "weft.E007",
                f"WEFT['MAX_PAYLOAD_BYTES'] must be a positive integer of at most "
                f"{MAX_PAYLOAD_LIMIT} (64 MiB), got {size!r}.",
                "Set it to e.g. 262144 (256 KiB); keep large data in your own tables and "
                "pass its key.",
            )
        )
    if not isinstance(merged["NOTIFY"], bool):
        found.append(
            Problem(
                "weft.E008",
                f"WEFT['NOTIFY'] must be True or False, got {merged['NOTIFY']!r}.",
                "Set WEFT['NOTIFY'] = True to use LISTEN/NOTIFY on PostgreSQL.",
            )
        )
    return found


# (the WEFT object, a copy of its items, the settings built from them), or None.
_cache: tuple[Any, Any, WeftSettings] | None = None


def clear_cache() -> None:
    """Forget the validated settings: the next :func:`get_settings` re-validates."""
    global _cache
    _cache = None


@receiver(setting_changed)
def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "WEFT":
        clear_cache()


def get_settings() -> WeftSettings:
    """Validated settings; raises :class:`WeftConfigurationError` when invalid.

    Cached until ``settings.WEFT`` changes (see the module docstring): a read
    of the cache compares the current dict with the copy it was built from.
    """
    global _cache
    raw = getattr(settings, "WEFT", None)
    cached = _cache  # one read: another thread may replace it meanwhile
    if cached is not None and cached[0] is raw and raw == cached[1]:
        return cached[2]
    built = _build()  # raises when invalid: nothing cached
    _cache = (raw, dict(raw) if isinstance(raw, dict) else raw, built)
    return built


def _build() -> WeftSettings:
    found = problems()  # reads settings.WEFT itself, so a non-dict is E001 too
    if found:
        lines = "; ".join(f"{p.msg} ({p.id}; hint: {p.hint})" for p in found)
        raise WeftConfigurationError(f"Invalid WEFT settings: {lines}")
    raw = _raw()
    merged = {**DEFAULTS, **raw}
    return WeftSettings(
        ownership=merged["OWNERSHIP"],
        claim_ttl=duration_seconds(merged["CLAIM_TTL"]) or 0.0,
        claim_renew_interval=duration_seconds(merged["CLAIM_RENEW_INTERVAL"]) or 0.0,
        lease_ttl=duration_seconds(merged["LEASE_TTL"]) or 0.0,
        lease_renew_interval=duration_seconds(merged["LEASE_RENEW_INTERVAL"]) or 0.0,
        tick_interval=duration_seconds(merged["TICK_INTERVAL"]) or 0.0,
        update_response_ttl=duration_seconds(merged["UPDATE_RESPONSE_TTL"]) or 0.0,
        max_payload_bytes=int(merged["MAX_PAYLOAD_BYTES"]),
        notify=bool(merged["NOTIFY"]),
        idle_in_transaction_timeout=duration_seconds(merged["IDLE_IN_TRANSACTION_TIMEOUT"]) or 0.0,
    )


@dataclass(frozen=True)
class PassLimits:
    """How much one store-wide pass (a Celery beat task) may do: at most
    ``batch_size`` runs, and no new run once ``time_budget`` seconds have passed."""

    batch_size: int = PASS_BATCH
    time_budget: float = 15.0

    @classmethod
    def of(cls, batch_size: Any = PASS_BATCH, time_budget: Any = 15.0) -> PassLimits:
        """Validated limits; :class:`WeftConfigurationError` for bad values."""
        check_batch_size(batch_size, "batch_size", maximum=PASS_MAX_BATCH)
        budget = duration_seconds(time_budget)
        if budget is None or budget <= 0:
            raise WeftConfigurationError(
                "time_budget must be a positive, finite number of seconds or a timedelta, "
                f"got {time_budget!r}."
            )
        return cls(batch_size, budget)
