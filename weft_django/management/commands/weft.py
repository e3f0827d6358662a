"""``manage.py weft``: the terminal console (docs/console.md).

    manage.py weft runs [--workflow NAME] [--status S] [--owner ENGINE] [--version N]
                        [--older-than 1h] [--newer-than 10m] [--limit 50] [--cursor C]
    manage.py weft describe RUN | history RUN [--after SEQ] [--limit N]
    manage.py weft signal RUN NAME [JSON] | update RUN NAME [JSON] | query RUN NAME [ARGS...]
    manage.py weft cancel|suspend|resume RUN... [--reason R] [--children] [--yes]
    manage.py weft retry RUN | fork RUN --from-step N
    manage.py weft engines [--all] | stuck

Every subcommand takes ``--json`` (one JSON document on stdout, for scripts),
``--as USER`` (the acting user, audited; default: the OS user's name) and
``--database ALIAS``. Exit statuses: 0 ok, 1 refused or failed, 2 usage, 3 not
found; an error is one line on stderr. The logic lives in
:mod:`weft_django.console`; this module parses and prints.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import timedelta
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...console import FAILED, NOT_FOUND, USAGE, ConsoleError, acting, listing, one_line, status_for
from ...console.render import as_json, record, table
from ...exceptions import InvalidIdError, WeftError, WorkflowNotFoundError
from ...models import RunStatus

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> timedelta:
    """``90``, ``90s``, ``10m``, ``2h``, ``3d``."""
    match = DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (90s, 10m, 2h, 3d)")
    return timedelta(seconds=float(match.group(1)) * UNITS[match.group(2)])


def step_number(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a step number (0, 1, 2...)")
    return int(text)


class OneLineParser(CommandParser):
    """Usage errors on one line of stderr, exit status 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split())
        if self.called_from_command_line:
            self.exit(USAGE, f"{self.prog}: error: {message} (see --help)\n")
        raise CommandError(f"Error: {message}", returncode=USAGE)


class Command(BaseCommand):
    help = "The weft console: list, describe and operate on workflow runs (docs/console.md)."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.__class__ = OneLineParser  # its errors too (a missing subcommand)
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        common = OneLineParser(add_help=False)
        common.add_argument("--json", action="store_true", help="Print one JSON document.")
        common.add_argument(
            "--as", dest="as_user", metavar="USER", help="The acting user (audited)."
        )
        common.add_argument("--database", default=None, help="The alias weft's tables live on.")
        sub = parser.add_subparsers(
            dest="subcommand", metavar="SUBCOMMAND", required=True, parser_class=OneLineParser
        )

        def add(name: str, text: str) -> argparse.ArgumentParser:
            found: argparse.ArgumentParser = sub.add_parser(name, parents=[common], help=text)
            return found

        runs = add("runs", "List runs, newest first (keyset-paged).")
        runs.add_argument("--workflow")
        runs.add_argument("--status", action="append", choices=RunStatus.values)
        runs.add_argument("--owner", metavar="ENGINE")
        runs.add_argument("--version", type=int)
        runs.add_argument("--older-than", type=duration)
        runs.add_argument("--newer-than", type=duration)
        runs.add_argument("--limit", type=int, default=50)
        runs.add_argument("--cursor")
        add("describe", "What a run is doing now.").add_argument("run")
        history = add("history", "A run's recorded events (paged by seq).")
        history.add_argument("run")
        history.add_argument("--after", type=int, default=-1, metavar="SEQ")
        history.add_argument("--limit", type=int, default=100)
        for name, text in (("signal", "Send a signal."), ("update", "Send an update.")):
            message = add(name, text)
            message.add_argument("run")
            message.add_argument("name")
            message.add_argument("payload", nargs="?", metavar="JSON")
            message.add_argument(f"--{name}-id", dest="message_id")
            if name == "signal":
                message.add_argument("--reason")
            else:
                message.add_argument("--timeout", type=float, default=30.0)
        query = add("query", "Ask a run's query handler.")
        query.add_argument("run")
        query.add_argument("name")
        query.add_argument("query_args", nargs="*", metavar="ARG")
        for name in acting.TRANSITIONS:
            operate = add(name, f"{name.capitalize()} runs.")
            operate.add_argument("runs", nargs="+", metavar="RUN")
            operate.add_argument("--reason")
            if name == "cancel":
                operate.add_argument("--children", action="store_true")
                operate.add_argument("--yes", action="store_true", help="Do not ask.")
        for name in ("retry", "fork"):
            copy = add(name, f"{name.capitalize()} a run as a new linked run.")
            copy.add_argument("run")
            copy.add_argument("--reason")
            copy.add_argument("--id", dest="new_id", help="The new run's id.")
            if name == "fork":
                copy.add_argument("--from-step", type=step_number, required=True, metavar="N")
        add("engines", "Engines, the claims they hold and their lease left.").add_argument(
            "--all", action="store_true", help="Stopped engines too."
        )
        add("stuck", "Runs due for longer than CLAIM_TTL with no live owner.").add_argument(
            "--limit", type=int, default=100
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            status = self._run(options)
        except ConsoleError as exc:
            raise CommandError(str(exc), returncode=exc.status) from None
        except WorkflowNotFoundError as exc:
            raise CommandError(one_line(exc), returncode=NOT_FOUND) from None
        except InvalidIdError as exc:
            raise CommandError(one_line(exc), returncode=USAGE) from None
        except (WeftError, TimeoutError) as exc:
            raise CommandError(one_line(exc), returncode=FAILED) from None
        except (TypeError, ValueError) as exc:
            raise CommandError(one_line(exc), returncode=USAGE) from None
        if status:
            raise CommandError("some runs were not changed (see above)", returncode=status)

    def _print(self, options: dict[str, Any], data: Any, text: str) -> None:
        self.stdout.write(as_json(data) if options["json"] else text)

    def _run(self, options: dict[str, Any]) -> int:
        command: str = options["subcommand"]
        using = options["database"]
        if command in ("runs", "describe", "history", "engines", "stuck"):
            self._read(command, options, using)
            return 0
        if command == "query":
            answer = acting.query(
                options["run"], options["name"], options["query_args"], using=using
            )
            self._print(options, answer, as_json(answer))
            return 0
        if command == "update":
            payload = acting.json_argument(options["payload"], "the payload")
            answer = acting.update(
                options["run"],
                options["name"],
                payload,
                timeout=options["timeout"],
                update_id=options["message_id"],
                using=using,
            )
            self._print(options, answer, as_json(answer))
            return 0
        by = acting.actor(options["as_user"])
        if command == "signal":
            payload = acting.json_argument(options["payload"], "the payload")
            outcomes = [
                acting.signal(
                    options["run"],
                    options["name"],
                    payload,
                    signal_id=options["message_id"],
                    reason=options["reason"],
                    by=by,
                    using=using,
                )
            ]
        elif command in ("retry", "fork"):
            common = {"new_id": options["new_id"], "reason": options["reason"], "by": by}
            if command == "retry":
                outcomes = [acting.retry(options["run"], using=using, **common)]
            else:
                outcomes = [
                    acting.fork(options["run"], options["from_step"], using=using, **common)
                ]
        else:
            if command == "cancel" and not options["yes"]:
                self._confirm(options["runs"], options["children"])
            outcomes = acting.transition(
                command,
                options["runs"],
                children=options.get("children", False),
                reason=options["reason"],
                by=by,
                using=using,
            )
        rows = [outcome.as_json() for outcome in outcomes]
        self._print(options, rows, table(rows, acting.OUTCOME_COLUMNS))
        for outcome in outcomes:
            if not outcome.done:
                self.stderr.write(f"failed {outcome.run}: {outcome.detail}")
        return status_for([o.error for o in outcomes if o.error is not None])

    def _read(self, command: str, options: dict[str, Any], using: str | None) -> None:
        if command == "runs":
            page = listing.runs(
                workflow=options["workflow"],
                statuses=options["status"],
                owner=options["owner"],
                version=options["version"],
                older_than=options["older_than"],
                newer_than=options["newer_than"],
                limit=options["limit"],
                cursor=options["cursor"],
                using=using,
            )
            text = table(page.rows, listing.RUN_COLUMNS)
            more = f"\nnext page: --cursor {page.next_cursor}" if page.next_cursor else ""
            self._print(options, page.as_json(), text + more)
        elif command == "history":
            page = listing.history(
                options["run"], after=options["after"], limit=options["limit"], using=using
            )
            text = table(page.rows, listing.HISTORY_COLUMNS)
            more = f"\nnext page: --after {page.next_cursor}" if page.next_cursor else ""
            self._print(options, page.as_json(), text + more)
        elif command == "describe":
            found = listing.describe(options["run"], using=using)
            self._print(options, found, record(found))
        elif command == "engines":
            rows = listing.engines(include_stopped=options["all"], using=using)
            self._print(options, rows, table(rows, listing.ENGINE_COLUMNS))
        else:
            stuck = listing.stuck(limit=options["limit"], using=using)
            more = " (there may be more)" if stuck["capped"] else ""
            text = (
                table(stuck["rows"], listing.STUCK_COLUMNS)
                + f"\n{len(stuck['rows'])} stuck run(s){more}\n\n"
                + table(stuck["expired_claims"], listing.EXPIRED_CLAIM_COLUMNS)
                + f"\n{len(stuck['expired_claims'])} claim(s) held by an expired engine"
            )
            self._print(options, stuck, text)

    def _confirm(self, run_ids: list[str], children: bool) -> None:
        if not sys.stdin.isatty():
            raise ConsoleError("cancel is irreversible: pass --yes to confirm", USAGE)
        tree = " and their unfinished descendants" if children else ""
        answer = input(f"cancel {len(run_ids)} run(s){tree}? This cannot be undone. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise ConsoleError("nothing done", FAILED)
