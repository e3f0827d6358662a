"""An app that exists only for the integration tests and the benchmarks.

Installed by :mod:`tests.integration.settings` (what the worker processes run
with); the pytest process imports its models and workflows without installing
it (the model declares its ``app_label``).
"""
