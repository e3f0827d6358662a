"""``manage.py weft_operate``: an operator's operation from the terminal.

Deprecated: ``manage.py weft`` (docs/console.md) is the console, with the
same operations (``cancel``, ``suspend``, ``resume``, ``signal``) and the
reads, ``retry`` and ``fork``; this command stays for scripts written against
it, and for ``purge``, and prints a one-line notice on stderr when run from
the command line.

    manage.py weft_operate cancel RUN_ID [RUN_ID ...] --reason "duplicate order" --user alice
    manage.py weft_operate suspend|resume|purge RUN_ID ...
    manage.py weft_operate signal RUN_ID ... --name decision --payload '{"ok": true}'

The same code path as the admin and the API (:mod:`weft_django.operations`):
each run is its own operation, recorded with the reason and the actor.
``--user`` names an existing user (a Django admin ``LogEntry`` is written for
them, as from the admin); without it the actor is the terminal's login name
(the log line and the run's error name it, no ``LogEntry``). Cancel and purge
are irreversible: they ask for confirmation unless ``--yes`` is given. Every
run is reported as done or failed; the exit status is 1 when any failed.
"""

from __future__ import annotations

import getpass
import json
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import operations

IRREVERSIBLE = ("cancel", "purge")


class Command(BaseCommand):
    help = (
        "Deprecated (use manage.py weft): cancel, suspend, resume, purge or signal runs, "
        "recorded with a reason and an actor."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("operation", choices=sorted(operations.APPLIES_TO))
        parser.add_argument("run_ids", nargs="+", metavar="RUN_ID")
        parser.add_argument("--reason", default=None, help="Why (recorded; at most 500 chars).")
        parser.add_argument(
            "--user", default=None, help="The acting user's username (a LogEntry is written)."
        )
        parser.add_argument("--name", default=None, help="signal: the signal's name.")
        parser.add_argument("--payload", default="null", help="signal: a JSON payload.")
        parser.add_argument("--signal-id", default=None, help="signal: makes a repeat a no-op.")
        parser.add_argument("--database", default=None, help="The alias weft's tables live on.")
        parser.add_argument("--yes", action="store_true", help="Do not ask before cancel/purge.")

    def handle(self, *args: Any, **options: Any) -> None:
        if getattr(self, "_called_from_command_line", False):
            self.stderr.write("weft_operate is deprecated: use manage.py weft (docs/console.md)")
        operation: str = options["operation"]
        run_ids: list[str] = options["run_ids"]
        by = self._actor(options["user"])
        extra: tuple[Any, ...] = ()
        kwargs: dict[str, Any] = {}
        if operation == "signal":
            if not options["name"]:
                raise CommandError("signal needs --name")
            try:
                payload = json.loads(options["payload"])
            except ValueError as exc:
                raise CommandError(f"--payload is not valid JSON: {exc}") from None
            extra = (options["name"], payload)
            kwargs["signal_id"] = options["signal_id"]
        if operation in IRREVERSIBLE and not options["yes"]:
            self._confirm(operation, run_ids)
        try:
            result = operations.batch(
                operation,
                run_ids,
                *extra,
                reason=options["reason"],
                by=by,
                using=options["database"],
                **kwargs,
            )
        except (TypeError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        for run_id in result.done:
            self.stdout.write(f"{operations.DONE[operation]} {run_id}")
        for run_id, error in result.failed:
            self.stderr.write(f"failed {run_id}: {type(error).__name__}: {error}")
        if result.failed:
            raise CommandError(
                f"{len(result.failed)} of {len(run_ids)} run(s) failed; nothing changed for them",
                returncode=1,
            )

    def _actor(self, username: str | None) -> Any:
        if username is None:
            try:
                return getpass.getuser()
            except (KeyError, OSError):
                return None
        model = get_user_model()
        user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        return user

    def _confirm(self, operation: str, run_ids: list[str]) -> None:
        if not sys.stdin.isatty():
            raise CommandError(f"{operation} is irreversible: pass --yes to confirm")
        answer = input(f"{operation} {len(run_ids)} run(s)? This cannot be undone. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise CommandError("nothing done")
