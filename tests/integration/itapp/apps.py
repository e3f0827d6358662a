from __future__ import annotations

from django.apps import AppConfig


class ItAppConfig(AppConfig):
    name = "tests.integration.itapp"
    label = "itapp"
    default_auto_field = "django.db.models.BigAutoField"
