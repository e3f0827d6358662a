"""The example project's Celery app: the standard Django + Celery layout.

``celery -A example_project worker`` and ``celery -A example_project beat``
load it. Celery reads every ``CELERY_*`` Django setting (``CELERY_BROKER_URL``,
``CELERY_BEAT_SCHEDULE``, ...), which the settings take from the environment,
and autodiscovers the ``tasks`` module of each installed app,
``weft_django.tasks`` among them.

With ``CELERY_BROKER_URL=filesystem://`` (bin/demo's default) the broker is
kombu's filesystem transport: a folder (``CELERY_BROKER_FOLDER``), which is
created here when the app's configuration is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

app = Celery("example_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

#: The folders of kombu's filesystem transport (it does not create them).
BROKER_FOLDERS = ("data_folder_in", "data_folder_out", "control_folder")


@app.on_after_configure.connect
def make_broker_folders(sender: Celery, **kwargs: Any) -> None:
    """Create the filesystem transport's folders, when that is the broker."""
    if not str(sender.conf.broker_url or "").startswith("filesystem://"):
        return
    options = sender.conf.broker_transport_options or {}
    for key in BROKER_FOLDERS:
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
