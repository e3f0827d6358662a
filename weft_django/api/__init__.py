"""The public verbs, callable from any process: views, shell, Celery tasks.

Every verb that starts, steers or reads a run is here (``weft.start`` and the
rest are these functions):

- :mod:`.runs`: ``start``, ``get_handle``, ``signal``, ``cancel``,
  ``suspend``, ``resume``, ``purge``, and the ``WorkflowHandle`` that
  ``start`` and ``get_handle`` return;
- :mod:`.bulk`: ``start_many`` and its ``StartRequest``;
- :mod:`.reads`: ``result`` and ``describe`` (a ``WorkflowDescription``);
- :mod:`.updates`: ``update`` and ``query``, the request/response verbs;
- :mod:`.schedules`: ``pause_schedule``, ``resume_schedule``, ``trigger_schedule``.
- :mod:`.recovery`: ``retry`` and ``fork``, which start a new run made from an old one.

The operator verbs (cancel, suspend, resume, purge, signal) share one audited
code path with the admin and ``manage.py weft_operate``
(:mod:`weft_django.operations`).
"""

from .bulk import StartRequest, start_many
from .reads import WorkflowDescription, describe, result
from .recovery import fork, retry
from .runs import WorkflowHandle, cancel, get_handle, purge, resume, signal, start, suspend
from .schedules import pause_schedule, resume_schedule, trigger_schedule
from .updates import query, update

__all__ = [  # noqa: RUF022 (grouped by use, as in weft_django.__all__)
    "start",
    "start_many",
    "StartRequest",
    "get_handle",
    "signal",
    "update",
    "query",
    "cancel",
    "suspend",
    "resume",
    "purge",
    "retry",
    "fork",
    "result",
    "describe",
    "WorkflowDescription",
    "WorkflowHandle",
    "pause_schedule",
    "resume_schedule",
    "trigger_schedule",
]
