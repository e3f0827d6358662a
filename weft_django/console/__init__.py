"""``manage.py weft``, the terminal console: the subcommands' logic, kept out
of the command (``weft_django/management/commands/weft.py`` only parses
arguments and calls these).

* :mod:`.listing`: ``runs`` (keyset-paged), ``describe``, ``history``,
  ``engines``, ``stuck`` -- reads, shared with the admin
  (:mod:`weft_django.inspection`, :func:`weft_django.describe`); the console
  never imports the admin, so it works in a project without
  ``django.contrib.admin``;
* :mod:`.acting`: ``signal``, ``update``, ``query``, ``cancel``, ``suspend``,
  ``resume``, ``retry``, ``fork`` -- through :mod:`weft_django.operations` and
  :mod:`weft_django.recovery`, the admin's own code path, audited the same way;
* :mod:`.render`: an aligned table, or JSON for scripts;
* here: the exit statuses (docs/console.md) and the console's error.
"""

from __future__ import annotations

from ..exceptions import WorkflowNotFoundError

#: The exit statuses of ``manage.py weft`` (docs/console.md, "Exit statuses").
OK = 0
#: An operation was refused or failed (a finished run, a busy run, a fork whose
#: history cannot be carried, an update rejected...), for at least one run.
FAILED = 1
#: The command line is wrong (unknown subcommand or option, bad JSON, a bad
#: cursor or duration, an unknown ``--as`` user).
USAGE = 2
#: A run (or every run that failed in a batch) does not exist.
NOT_FOUND = 3


class ConsoleError(Exception):
    """What the command reports on one line of stderr, and the exit status."""

    def __init__(self, message: str, status: int = FAILED) -> None:
        self.status = status
        super().__init__(" ".join(message.split()))


def status_for(errors: list[BaseException]) -> int:
    """The exit status of a batch whose runs failed with ``errors``."""
    if not errors:
        return OK
    if all(isinstance(error, WorkflowNotFoundError) for error in errors):
        return NOT_FOUND
    return FAILED


def one_line(error: BaseException) -> str:
    """``Type: message`` on one line."""
    return " ".join(f"{type(error).__name__}: {error}".split())
