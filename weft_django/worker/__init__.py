"""The worker: the engine host behind ``manage.py weft_worker`` (docs/architecture.md).

``Worker`` (:mod:`.host`) runs one engine, its renewal loop and wake-ups; the
rest of the wing is what it is made of: the executor threads (:mod:`.pool`),
supervised threads and the renewal watch (:mod:`.supervision`), the shutdown
grace (:mod:`.shutdown`), the optional prune thread (:mod:`.prune_thread`) and
what a worker logs (:mod:`.logs`).
"""

from .host import Worker

__all__ = ["Worker"]
