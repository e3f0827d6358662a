"""Leases: the engine rows claims live on (:mod:`.engines`), lease state as
operators see it (:mod:`.state`), and the single-row leases held by one engine
at a time (:mod:`.store`: the store-wide lease of mode ``lease``, and the
lease implementation other singleton duties reuse)."""
