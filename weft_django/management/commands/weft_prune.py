"""``manage.py weft_prune``: delete finished runs and stopped engines past their
retention (``WEFT["RETENTION"]``, docs/retention.md), in bounded batches.

Prints what it deleted per table; ``--dry-run`` prints what it would delete and
deletes nothing. Bad input is a ``CommandError`` before any row is touched.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections

from ...conf import PRUNE_BATCH, PRUNE_MAX_BATCH
from ...exceptions import WeftConfigurationError
from ...models import TERMINAL_STATUSES
from ...retention.pruner import TABLES, Batch, Pruner
from ...retention.settings import policy

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_duration(text: str) -> float:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"2w"``, or plain seconds."""
    match = DURATION.match(text)
    if match is None:
        raise CommandError(
            f"--older-than {text!r} is not a duration: use a number of seconds or a "
            "number with a unit s, m, h, d or w (e.g. 30d, 12h)."
        )
    return float(match.group(1)) * UNITS[match.group(2) or "s"]


class Command(BaseCommand):
    help = (
        "Delete finished runs (with their events, signals and update rows) and stopped "
        "engines past their retention (WEFT['RETENTION']), in bounded batches."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would be deleted; delete nothing."
        )
        parser.add_argument(
            "--older-than",
            metavar="DURATION",
            help="Prune finished runs (and stopped engines) older than this, instead of "
            "their retention settings: seconds, or e.g. 30d, 12h, 90m.",
        )
        parser.add_argument(
            "--status",
            nargs="+",
            metavar="S",
            help=f"Only runs with these statuses ({', '.join(TERMINAL_STATUSES)}); stopped "
            "engines are then left alone.",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            metavar="N",
            help=f"Runs per batch, each its own transaction (1 to {PRUNE_MAX_BATCH}; default: "
            f"WEFT['RETENTION']['BATCH_SIZE'], {PRUNE_BATCH}).",
        )
        parser.add_argument(
            "--time-budget",
            type=float,
            metavar="SECONDS",
            help="Start no new batch after this many seconds (default: until done).",
        )
        parser.add_argument(
            "--database",
            default=DEFAULT_DB_ALIAS,
            help="The database alias weft's tables live on (default: 'default').",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        using = options["database"]
        if using not in connections:
            raise CommandError(f"--database {using!r} is not a configured database alias.")
        statuses = options["status"]
        if statuses is not None:
            bad = sorted({s for s in statuses if s not in TERMINAL_STATUSES})
            if bad:
                raise CommandError(
                    f"--status {', '.join(bad)}: only finished runs are pruned; use "
                    f"{', '.join(TERMINAL_STATUSES)}."
                )
        older_than = None
        if options["older_than"] is not None:
            older_than = parse_duration(options["older_than"])
        verbosity = int(options["verbosity"])
        try:
            pruner = Pruner(
                retention=policy(),
                statuses=statuses,
                older_than=older_than,
                engines=statuses is None,
                batch_size=options["batch_size"],
                time_budget=options["time_budget"],
                dry_run=options["dry_run"],
                on_batch=self._progress if verbosity >= 2 else None,
                using=using,
            )
        except WeftConfigurationError as exc:
            raise CommandError(str(exc)) from None
        summary = pruner.run()
        verb = "Would delete" if summary.dry_run else "Deleted"
        if not pruner.retentions and pruner.engine_retention is None:
            self.stdout.write("Nothing to prune: every selected retention is None (keep forever).")
        for table in TABLES:
            self.stdout.write(f"{verb} {summary.deleted[table]} {table}")
        for status, count in summary.by_status.items():
            cutoff = summary.cutoffs[status].isoformat()
            self.stdout.write(f"  {status}: {count} run(s) finished before {cutoff}")
        skipped = {why: count for why, count in summary.skipped.items() if count}
        if skipped:
            self.stdout.write(
                "Skipped (kept for a later pass): "
                + ", ".join(f"{count} {why}" for why, count in skipped.items())
            )
        state = "done" if summary.complete else "stopped at the time budget (run it again)"
        self.stdout.write(f"{summary.batches} batch(es) in {summary.seconds:.2f}s: {state}")

    def _progress(self, batch: Batch) -> None:
        counts = " ".join(f"{t}={n}" for t, n in batch.deleted.items() if n)
        self.stdout.write(f"  batch {batch.target}: {counts or 'nothing'}")
