"""Kept for settings written before :mod:`weft_django.beat`: import from there.

``from weft_django.celery import beat_schedule`` in a settings module keeps
working; new code imports :mod:`weft_django.beat`. (A module named
``celery.py`` conventionally defines a Celery app; this one never did.)
"""

from .beat import TASKS, beat_entry, beat_schedule, install_periodic_tasks

__all__ = ["TASKS", "beat_entry", "beat_schedule", "install_periodic_tasks"]
