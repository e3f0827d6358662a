"""Leases: the engine rows claims live on (:mod:`.engines`), lease state as
operators see it (:mod:`.state`), and the single-row leases held by one engine
at a time: the one implementation (:mod:`.singleton`), used by the store-wide
lease of mode ``lease`` (:mod:`.store`) and by the pruner lease
(:mod:`weft_django.retention.lease`)."""
