"""The weft_django example project.

Its Celery app is loaded with the project, as Django + Celery projects do, so
that tasks sent from any of its processes use it; without the ``celery`` extra
installed the project runs without it.
"""

from __future__ import annotations

try:
    from .celery import app as celery_app
except ModuleNotFoundError as exc:  # the celery extra is not installed
    if exc.name != "celery":
        raise
    celery_app = None

__all__ = ["celery_app"]
