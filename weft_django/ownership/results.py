"""Typed results of claim transitions (DESIGN.md §4.3); no transition raises for a race."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Acquired:
    """This engine now holds the claim at ``epoch``."""

    workflow_id: str
    epoch: int
    takeover: bool = False
    outcome = "acquired"


@dataclass(frozen=True)
class LostRace:
    """Another engine holds the claim, or changed it between our read and write."""

    workflow_id: str
    held_by: str | None
    outcome = "lost_race"


@dataclass(frozen=True)
class NotExpired:
    """The holder's lease is still live on the database clock."""

    workflow_id: str
    held_by: str
    expires_at: datetime
    outcome = "not_expired"


@dataclass(frozen=True)
class NoClaim:
    """No claim row exists for this workflow id."""

    workflow_id: str
    outcome = "no_claim"


@dataclass(frozen=True)
class BackoffSkipped:
    """Not attempted: the workflow is in its anti-thrash cooldown."""

    workflow_id: str
    until: float
    outcome = "backoff_skipped"


@dataclass(frozen=True)
class Lost:
    """A claim this engine believed it held was taken over or revoked."""

    workflow_id: str
    epoch: int
    outcome = "lost"


@dataclass(frozen=True)
class NotHeld:
    """Release of a claim this engine does not hold at that epoch: nothing changed."""

    workflow_id: str
    outcome = "not_held"


@dataclass(frozen=True)
class Released:
    workflow_id: str
    epoch: int
    outcome = "released"


ClaimResult = Acquired | LostRace | NotExpired | NoClaim | BackoffSkipped


@dataclass(frozen=True)
class ClaimState:
    """A claim row as read, with its holder's lease expiry (None when unheld)."""

    workflow_id: str
    epoch: int
    holder_id: str | None
    claimed_at: datetime | None
    expires_at: datetime | None


@dataclass
class RenewResult:
    """What one renewal pass did: times, counts and per-workflow outcomes."""

    started_at: datetime
    finished_at: datetime | None = None
    engine_renewed: bool = False
    held: dict[str, int] = field(default_factory=dict)
    lost: list[Lost] = field(default_factory=list)

    @property
    def renewed_count(self) -> int:
        return len(self.held) - len(self.lost)

    @property
    def failed_count(self) -> int:
        return len(self.lost)

    @property
    def outcomes(self) -> dict[str, str]:
        """``renewed`` or ``failed`` for every claim held when the pass started."""
        failed = {item.workflow_id for item in self.lost}
        return {wid: ("failed" if wid in failed else "renewed") for wid in self.held}
