"""Settings of the integration tests' worker processes (and of the benchmarks).

The example project's settings (everything from the environment:
``DATABASE_URL``, ``WEFT_*``) plus the integration app, whose workflows and
``StepExecution`` table the tests use.
"""

from example_project.settings import *  # noqa: F403
from example_project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.integration.itapp"]
