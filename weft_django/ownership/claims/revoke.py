"""Revocation: a process that does not own a run takes the claim away from its owner.

``cancel``, ``suspend``, ``purge`` and the execution timeout commit a new
status for a run from any process, and ``resume`` makes a suspended run
runnable again. In the same transaction the claim's epoch is rotated and the
claim released by the release rule (:mod:`.release`), so a still-running
owner's next fenced write fails and it stops that run (docs/ownership.md,
"Revocation"), and a run left active (``resume``) is in the released index
every worker reads.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F

from ...models import Claim, Engine
from .release import first_claim, revoke_held


class _Changed(Exception):
    """Internal: the claim changed between our read and our write; try again."""


def revoke_statement(using: str, workflow_id: str, *, ended: bool = True) -> int:
    """Rotate the epoch and release the claim (cancel, suspend, purge, timeout,
    resume).

    Run inside the transaction that writes the new status. ``ended``: whether
    the run is not active after that write (cancelled, suspended, timed out,
    purged); ``resume`` passes False, so the claim is stamped free to take
    (:mod:`.release`). Bumps the old holder's revocation counter so its renewal
    reports the loss, locking the engine row before the claim row (the same
    order as ``takeover``), and moves the claim only if the holder is still the
    one whose counter was bumped. Returns the new epoch (epoch 1 when the id
    never had a claim).
    """
    claims = Claim.objects.using(using)
    for _attempt in range(10):
        holder_id = claims.filter(workflow_id=workflow_id).values_list("holder_id", flat=True)
        rows = list(holder_id[:1])
        if not rows:
            try:
                with transaction.atomic(using=using):
                    first_claim(using, workflow_id, ended=ended)
                return 1
            except IntegrityError:
                continue
        holder = rows[0]
        try:
            with transaction.atomic(using=using):
                if holder is not None:
                    Engine.objects.using(using).filter(id=holder).update(
                        revocations=F("revocations") + 1
                    )
                if revoke_held(using, workflow_id, holder, ended=ended) != 1:
                    raise _Changed
        except _Changed:
            continue
        return claims.filter(workflow_id=workflow_id).values_list("epoch", flat=True).get()
    raise RuntimeError(f"could not revoke the claim on {workflow_id!r}: it kept changing")
