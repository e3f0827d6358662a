"""Settings of worker processes that run the update tests' workflows.

The integration settings (example project + ``itapp``, everything else from
the environment) plus ``tests.updates`` as an app, so weft_django's
autodiscovery registers :mod:`tests.updates.workflows` in the worker too.
Used by ``tests/integration/test_updates_processes.py`` and
``bench/update_latency.py``.
"""

from tests.integration.settings import *  # noqa: F403
from tests.integration.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.updates"]
