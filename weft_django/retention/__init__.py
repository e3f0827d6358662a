"""Retention (docs/retention.md): finished runs and stopped engines do not pile up.

- :mod:`.settings`: ``WEFT["RETENTION"]``, validated by system checks;
- :mod:`.pruner`: what a prune deletes, in bounded batches;
- :mod:`.stats`: what is left to prune, for the admin overview;
- :mod:`.lease`: the lease that lets one worker's prune thread run at a time.

The prune runs from ``manage.py weft_prune``, the Celery task
``weft_django.prune_pass`` or a worker's prune thread
(:mod:`weft_django.worker.prune_thread`). This package imports nothing on its
own, so the settings module can be read before the app registry is ready.
"""
