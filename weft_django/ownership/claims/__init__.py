"""Per-workflow claims (docs/ownership.md): the registry of one engine's claims
(:mod:`.registry`), the first claims of new runs (:mod:`.first`, :mod:`.intake`),
the release rule (:mod:`.release`), revocation (:mod:`.revoke`), the
anti-thrash cooldown (:mod:`.cooldown`) and the typed results of every claim
transition (:mod:`.results`).
"""
