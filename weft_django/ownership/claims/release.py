"""The release rule: the one definition of "this claim is free to take"
(docs/ownership.md, "The release rule").

A claim is **free to take** when it has no holder. Every path that lets go of a
claim writes the same columns, through this module and nowhere else:

* ``holder = NULL`` and ``claimed_at = NULL`` (the ``weft_claim_holder_consistent``
  constraint: no holder, no claim time);
* ``released_at = now`` when the run is still **active** after the write
  (pending, running, waiting): the stamp puts the claim in the partial index
  ``weft_claim_released_idx`` that the reclaim scan reads on every pass, so a
  live worker takes it within one pass. A released run that is also *due* (a
  wake hint, a due timer) is found sooner, by the fast tick's own query off
  the wake indexes (:func:`weft_django.ownership.passes.scans.woken`), and taken
  within one tick;
* ``released_at = NULL`` when the run has **ended** (terminal, suspended, or
  deleted): nothing should take it, so it stays out of that index. A claim let
  go of while its run was active, whose run ended afterwards, is unstamped by
  the scan that finds it (:func:`unstamp_ended`).

The paths: the owner letting go of a run it has not finished (a graceful stop's
:func:`release_engine`, a release at park, a claim won while disposing, a run
of a type it lacks: :func:`release_held`); the owner's terminal or suspend
commit (:func:`release_held` with ``ended``, or :data:`ENDED_SQL` inside the
one-statement terminal commit); and a revocation by any process
(:func:`revoke_held` and :func:`first_claim`: ``cancel``, ``suspend``,
``purge``, the execution timeout end the run, ``resume`` makes it active).

Every write is one conditional UPDATE (or one INSERT) whose row count the caller
reads; nothing is read, changed in Python and written back. The epoch is the
caller's business: an owner's release keeps it, a revocation moves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import F
from django.db.models.functions import Now

from ...models import Claim

#: The release's SET clause in raw SQL, for a run that ended (the terminal
#: commit as one statement, :mod:`.fenced_writes`).
ENDED_SQL = "holder_id = NULL, claimed_at = NULL, released_at = NULL"


def freed(*, ended: bool) -> dict[str, Any]:
    """The columns every release writes (see the module's docstring): no holder,
    no claim time, and the stamp when the run is still active (``ended`` False)."""
    return {"holder_id": None, "claimed_at": None, "released_at": None if ended else Now()}


def release_held(
    using: str, workflow_id: str, engine_id: str, epoch: int, *, ended: bool = False
) -> bool:
    """The holder lets go of one claim, epoch unchanged: conditional on the holder
    and the epoch it holds it at. True when it released (one row matched). For
    use on its own or inside the caller's transaction (a terminal commit)."""
    return (
        Claim.objects.using(using)
        .filter(workflow_id=workflow_id, holder_id=engine_id, epoch=epoch)
        .update(**freed(ended=ended))
        == 1
    )


def release_engine(using: str, engine_id: str) -> int:
    """A graceful stop: every claim ``engine_id`` still holds, in one UPDATE, epochs
    unchanged. Their runs are active (a run that ended released its claim in its
    own commit), so each is stamped. Returns how many were released."""
    return Claim.objects.using(using).filter(holder_id=engine_id).update(**freed(ended=False))


def revoke_held(using: str, workflow_id: str, holder_id: str | None, *, ended: bool) -> int:
    """A revocation's move of the claim: epoch + 1, released by the rule, only if
    the holder is still ``holder_id`` (None: still no holder). Returns the row
    count (0: it changed since it was read; the caller reads again)."""
    return (
        Claim.objects.using(using)
        .filter(workflow_id=workflow_id, holder_id=holder_id)
        .update(epoch=F("epoch") + 1, **freed(ended=ended))
    )


def first_claim(using: str, workflow_id: str, *, ended: bool) -> None:
    """A revocation of an id that never had a claim: its first row, at epoch 1,
    free by the rule (raises ``IntegrityError`` when another process inserted it
    first)."""
    Claim.objects.using(using).create(workflow_id=workflow_id, epoch=1, **freed(ended=ended))


def unstamp_ended(using: str, workflow_ids: Sequence[str]) -> int:
    """Free claims among ``workflow_ids`` whose runs were found ended (or gone)
    after they were let go of: their stamp is dropped, so they leave the index.
    Only claims still without a holder (one taken meanwhile keeps its row as is)."""
    if not workflow_ids:
        return 0
    return (
        Claim.objects.using(using)
        .filter(workflow_id__in=list(workflow_ids), holder__isnull=True)
        .update(released_at=None)
    )
