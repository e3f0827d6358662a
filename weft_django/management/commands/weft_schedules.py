"""``manage.py weft_schedules``: the cron schedules, and pause / resume / trigger.

    manage.py weft_schedules                       # each schedule and its next 5 firings
    manage.py weft_schedules --next 10 --json
    manage.py weft_schedules pause NAME [NAME ...] --reason "maintenance" --user alice
    manage.py weft_schedules resume|trigger NAME ...

The operations go through :mod:`weft_django.schedules.operations` (audited as
from the admin: ``--user`` names an existing user, who gets a ``LogEntry``;
without it the actor is the terminal's login name). Listing reads the
declarations and the schedules' rows; a schedule no worker has synced yet
shows its next firings from now.
"""

from __future__ import annotations

import getpass
import json
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...exceptions import WeftError
from ...models import Schedule, db_for
from ...ownership import db_now
from ...schedules import operations
from ...schedules.cron import iso
from ...schedules.declare import declared


class Command(BaseCommand):
    help = "List the cron schedules with their next firings; pause, resume or trigger them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "operation", nargs="?", default="list", choices=["list", "pause", "resume", "trigger"]
        )
        parser.add_argument("names", nargs="*", metavar="NAME")
        parser.add_argument("--next", type=int, default=5, help="list: firings shown (default 5)")
        parser.add_argument("--json", action="store_true", help="list: as JSON")
        parser.add_argument("--reason", default=None, help="Why (recorded; at most 500 chars).")
        parser.add_argument(
            "--user", default=None, help="The acting user's username (a LogEntry is written)."
        )
        parser.add_argument("--database", default=None, help="The alias weft's tables live on.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            specs = declared()
        except WeftError as exc:
            raise CommandError(str(exc)) from exc
        if options["operation"] == "list":
            self._list(specs, options)
            return
        if not options["names"]:
            raise CommandError(f"{options['operation']} needs at least one schedule NAME")
        by = self._actor(options["user"])
        verb = getattr(operations, options["operation"])
        failed = False
        for name in options["names"]:
            try:
                result = verb(name, reason=options["reason"], by=by, using=options["database"])
            except (WeftError, ValueError) as exc:
                self.stderr.write(f"{name}: {exc}")
                failed = True
                continue
            if result is False:
                self.stdout.write(f"{name}: unchanged (already {options['operation']}d)")
            elif options["operation"] == "trigger":
                self.stdout.write(f"{name}: triggered run {result.id}")
            else:
                self.stdout.write(f"{name}: {operations.DONE[options['operation']]}")
        if failed:
            raise CommandError("some schedules were not changed")

    def _list(self, specs: dict[str, Any], options: dict[str, Any]) -> None:
        count = options["next"]
        if count < 0:
            raise CommandError("--next must be 0 or more")
        alias = db_for(options["database"])
        rows = {row.name: row for row in Schedule.objects.using(alias).filter(name__in=list(specs))}
        now = db_now(alias)
        found = []
        for name, spec in sorted(specs.items()):
            row = rows.get(name)
            cron = spec.parsed()
            start = row.next_tick if row is not None and row.next_tick else None
            ticks = [start] if start is not None else []
            ticks += cron.upcoming(start or now, count - len(ticks)) if count > len(ticks) else []
            found.append(
                {
                    "name": name,
                    "workflow": spec.workflow_name,
                    "task": spec.task_path,
                    "cron": cron.expression,
                    "timezone": cron.timezone,
                    "catch_up": spec.catch_up,
                    "overlap": spec.overlap,
                    "paused": bool(row and row.paused),
                    "last_tick": _text(row.last_tick if row else None),
                    "last_run_id": (row.last_run_id if row else "") or None,
                    "next": [iso(tick) for tick in ticks[:count]],
                }
            )
        if options["json"]:
            self.stdout.write(json.dumps(found, indent=2))
            return
        if not found:
            self.stdout.write("No schedules declared (@weft.schedule or WEFT['SCHEDULES']).")
        for item in found:
            state = "paused" if item["paused"] else "active"
            target = item["workflow"] + (f" (task {item['task']})" if item["task"] else "")
            self.stdout.write(
                f"{item['name']}  {item['cron']} ({item['timezone']})  -> {target}  "
                f"[{state}; catch_up={item['catch_up']} overlap={item['overlap']}]"
            )
            self.stdout.write(
                f"  last: {item['last_tick'] or '-'}  run: {item['last_run_id'] or '-'}"
            )
            for tick in item["next"]:
                self.stdout.write(f"  next: {tick}")

    def _actor(self, username: str | None) -> Any:
        if username is None:
            try:
                return getpass.getuser()
            except (KeyError, OSError):
                return None
        try:
            return get_user_model()._default_manager.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {username!r}") from None


def _text(moment: datetime | None) -> str | None:
    return iso(moment.astimezone(UTC)) if moment is not None else None
