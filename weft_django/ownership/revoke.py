"""Revocation: a process that does not own a run takes the claim away from its owner.

``cancel``, ``suspend``, ``purge`` and the execution timeout commit a new
status for a run from any process. In the same transaction the claim's epoch
is rotated and its holder dropped, so a still-running owner's next fenced
write fails and it stops that run (docs/ownership.md, "Revocation").
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F

from ..models import Claim, Engine


class _Changed(Exception):
    """Internal: the claim changed between our read and our write; try again."""


def revoke_statement(using: str, workflow_id: str) -> int:
    """Rotate the epoch and drop the holder (cancel, suspend, purge, timeout).

    Run inside the transaction that writes the new status. Bumps the old
    holder's revocation counter so its renewal reports the loss, locking the
    engine row before the claim row (the same order as ``takeover``), and
    moves the claim only if the holder is still the one whose counter was
    bumped. Returns the new epoch (epoch 1 when the id never had a claim).
    """
    claims = Claim.objects.using(using)
    for _attempt in range(10):
        holder_id = claims.filter(workflow_id=workflow_id).values_list("holder_id", flat=True)
        rows = list(holder_id[:1])
        if not rows:
            try:
                with transaction.atomic(using=using):
                    claims.create(workflow_id=workflow_id, epoch=1)
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
                moved = claims.filter(workflow_id=workflow_id, holder_id=holder).update(
                    epoch=F("epoch") + 1, holder_id=None, claimed_at=None, released_at=None
                )
                if moved != 1:
                    raise _Changed
        except _Changed:
            continue
        return claims.filter(workflow_id=workflow_id).values_list("epoch", flat=True).get()
    raise RuntimeError(f"could not revoke the claim on {workflow_id!r}: it kept changing")
