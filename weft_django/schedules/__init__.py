"""Cron schedules fired exactly once per tick by any number of workers
(docs/schedules.md). A wing of its own, its modules on the layers of what they do:

- :mod:`.cron`: cron expressions and time zones (``cronsim``), tick ids;
- :mod:`.declare`: ``@weft.schedule`` and ``WEFT["SCHEDULES"]``;
- :mod:`.lease`: the single-row schedule lease and its fence;
- :mod:`.firing`: the firing pass (sync, catch-up and overlap policies);
- :mod:`.operations`: pause, resume and trigger, audited;
- :mod:`.metrics`: Prometheus counters of fired, skipped, late ticks.

The worker's thread is :mod:`weft_django.worker.schedule_thread`; the admin's
page :mod:`weft_django.admin.schedules`; the command ``manage.py weft_schedules``.
"""
