"""The integration settings without a ``LOGGING`` setting, as in a project fresh
from ``django-admin startproject``: Django's default logging only, which gives
the ``weft_django`` loggers no handler."""

from tests.integration.settings import *  # noqa: F403

del LOGGING  # noqa: F821 (star-imported)
