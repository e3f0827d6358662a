"""Patching inside one workflow version: ``ctx.patched`` and ``ctx.deprecate_patch``.

A patch marker is an ordinary history event (kind ``patch``, its name the
change id), buffered like ``ctx.now()``'s value and committed, fenced, with
the turn's next write. ``patched(change_id)``:

- live (no recorded event at this position): records the marker, True;
- replaying, the recorded event here is that marker: consumes it, True;
- replaying, the recorded event here is something else: the run went past
  this point on the old code, False, and no sequence number is taken, so the
  old path replays against its own history.

The answer is remembered for the rest of the run's replay (a ``patched()`` in
a loop asks once): a run is either on the new path of a change or on the old
one. ``deprecate_patch(change_id)`` is for when no run that went past the
point on the old path is left: it consumes the marker where history has it
and records nothing live, so it replays on runs with the marker and on runs
without it; once the runs that have the marker have finished, delete the call.
"""

from __future__ import annotations

from .payload import EVENT_NAME, check_id
from .replay import Replay

#: The kind of a patch marker event.
PATCH = "patch"


def patched(replay: Replay, change_id: str) -> bool:
    """True on the new path of ``change_id`` (see the module docstring)."""
    check_id(change_id, "patch change_id", EVENT_NAME)
    known = replay.patches.get(change_id)
    if known is not None:
        return known
    event = replay.peek()
    if event is None:
        replay.buffer.append(replay.new(PATCH, change_id))
        answer = True
    elif event.kind == PATCH and event.name == change_id:
        replay.advance()
        answer = True
    else:
        answer = False  # history went past this point without the marker
    replay.patches[change_id] = answer
    return answer


def deprecate_patch(replay: Replay, change_id: str) -> None:
    """Consume ``change_id``'s marker where history has it here; nothing live."""
    check_id(change_id, "patch change_id", EVENT_NAME)
    if change_id in replay.patches:
        return
    if replay.is_replaying:
        event = replay.peek()
        if event is not None and event.kind == PATCH and event.name == change_id:
            replay.advance()
    replay.patches[change_id] = True
