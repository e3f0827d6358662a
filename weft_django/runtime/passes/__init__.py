"""The engine's passes: the renewal loop's (:mod:`.renewal`), the Celery beat
tasks' store-wide passes (:mod:`.store`) and their summaries (:mod:`.summaries`).
The queries each pass runs are the ownership protocol's
(:mod:`weft_django.ownership`)."""
