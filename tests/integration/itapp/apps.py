from __future__ import annotations

import os

from django.apps import AppConfig


class ItAppConfig(AppConfig):
    name = "tests.integration.itapp"
    label = "itapp"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        if os.environ.get("IT_FAULT"):
            from . import faults

            faults.install(os.environ["IT_FAULT"])
