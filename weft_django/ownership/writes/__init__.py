"""Fenced writes: every write of a run's owner proves, in its own transaction or
statement, that the engine still holds the run (docs/ownership.md, "Fencing").

- :mod:`.requests`: the :class:`~.requests.Fence` token, the typed requests of
  the one-statement writes, and which database has which form;
- :mod:`.fence`: the fenced transaction (a locking read of the claim, then the writes);
- :mod:`.single`: fenced writes folded into one statement (insert, finish, a group);
- :mod:`.wake`: a woken turn's writes as one statement (PostgreSQL);
- :mod:`.group`: the group commit of one engine's concurrent turns;
- :mod:`.cursor`: the cursor the hot statements go through (prepared where possible).
"""
