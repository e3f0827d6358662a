"""App config: registers system checks and autodiscovers ``workflows`` modules."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WeftConfig(AppConfig):
    name = "weft_django"
    label = "weft_django"
    verbose_name = _("Weft workflows")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        from . import checks  # noqa: F401  (registers the system checks)
        from .checks import extras

        autodiscover_modules("workflows")
        if extras.task_backend_aliases() and extras.has_django_tasks():
            # Every process knows the django.tasks.<queue> workflows (docs/tasks.md).
            from .backends import register_configured

            register_configured()
