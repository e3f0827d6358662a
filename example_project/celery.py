"""The example project's Celery app: the standard Django + Celery layout.

``celery -A example_project worker`` and ``celery -A example_project beat``
load it. Celery reads every ``CELERY_*`` Django setting (``CELERY_BROKER_URL``,
``CELERY_BEAT_SCHEDULE``, ...) and autodiscovers the ``tasks`` module of each
installed app, ``weft_django.tasks`` among them.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

app = Celery("example_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
