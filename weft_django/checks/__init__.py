"""Every system check of weft_django, in one home (README.md, "System checks").

- :mod:`.configuration`: the ``WEFT`` settings (``weft.E001``-``E012``), the
  retention settings (``E016``, ``E017``), unapplied migrations (``E018``)
  and more live engines than the mode allows (``W001``);
- :mod:`.extras`: optional features configured without their extra
  (``weft.E013``-``E015``): the PostgreSQL driver, the Tasks API backend;
- :mod:`.schedules`: the cron schedules (``weft.E030``-``E033``);
- :mod:`.queues`: the flow-control queues (``weft.E040``-``E046``).

Importing this package registers them (``WeftConfig.ready()`` does).
"""

from . import configuration, extras, queues, schedules

__all__ = ["configuration", "extras", "queues", "schedules"]
