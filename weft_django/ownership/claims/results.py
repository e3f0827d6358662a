"""Typed results of claim transitions; no transition raises for a race (docs/ownership.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from ..passes.outcomes import Outcome


@dataclass(frozen=True)
class Acquired:
    """This engine now holds the claim at ``epoch``."""

    workflow_id: str
    epoch: int
    takeover: bool = False
    outcome: ClassVar[Outcome] = Outcome.ACQUIRED


@dataclass(frozen=True)
class LostRace:
    """Another engine holds the claim, or changed it between our read and write."""

    workflow_id: str
    held_by: str | None
    outcome: ClassVar[Outcome] = Outcome.LOST_RACE


@dataclass(frozen=True)
class NotExpired:
    """The holder's lease is still live on the database clock."""

    workflow_id: str
    held_by: str
    expires_at: datetime
    outcome: ClassVar[Outcome] = Outcome.NOT_EXPIRED


@dataclass(frozen=True)
class Busy:
    """Not taken now: the holder's open transaction locks the claim (retried later)."""

    workflow_id: str
    held_by: str | None
    outcome: ClassVar[Outcome] = Outcome.BUSY


@dataclass(frozen=True)
class BackoffSkipped:
    """Not attempted: the workflow is in its anti-thrash cooldown."""

    workflow_id: str
    until: float
    outcome: ClassVar[Outcome] = Outcome.BACKOFF_SKIPPED


@dataclass(frozen=True)
class Lost:
    """A claim this engine believed it held was taken over or revoked."""

    workflow_id: str
    epoch: int
    outcome: ClassVar[Outcome] = Outcome.LOST


@dataclass(frozen=True)
class NotHeld:
    """Release of a claim this engine does not hold at that epoch: nothing changed."""

    workflow_id: str
    outcome: ClassVar[Outcome] = Outcome.NOT_HELD


@dataclass(frozen=True)
class Released:
    workflow_id: str
    epoch: int
    outcome: ClassVar[Outcome] = Outcome.RELEASED


ClaimResult = Acquired | LostRace | NotExpired | BackoffSkipped | Busy


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
    def outcomes(self) -> dict[str, Outcome]:
        """``renewed`` or ``failed`` for every claim held when the pass started."""
        outcomes = dict.fromkeys(self.held, Outcome.RENEWED)
        outcomes.update((item.workflow_id, Outcome.FAILED) for item in self.lost)
        return outcomes
