"""``manage.py weft_replay``: replay stored histories against the code as it is now.

Read-only (the replay queries use: no step runs, nothing is written). Prints
one line per run, ``ok`` or the first divergence, and exits with status 1
when any run diverges or cannot be replayed here, so CI or a deploy script
can stop. ``--export RUN_ID`` writes a run's history as JSON instead, for
``weft_django.testing.replay`` in a unit test. The logic is
:mod:`weft_django.runtime.replay_check`.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DEFAULT_DB_ALIAS

from ...models import RunStatus
from ...runtime.replay_check import (
    IN_FLIGHT,
    ReplayOutcome,
    check_runs,
    export_history,
    runs_to_check,
    unserved_pending,
)


class Command(BaseCommand):
    help = (
        "Replay the stored histories of runs in flight (or of the runs given) against "
        "the workflow code as it is now, read-only; print ok or the first divergence per "
        "run; exit 1 when any run diverges. --export RUN_ID writes a run's history as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--workflow", action="append", default=[], metavar="NAME", help="Only runs of NAME."
        )
        parser.add_argument(
            "--status",
            action="append",
            default=[],
            metavar="S",
            choices=list(RunStatus.values),
            help=f"Only runs with this status (repeatable; default: {', '.join(IN_FLIGHT)}). "
            "Add completed or failed to check recently finished runs too.",
        )
        parser.add_argument(
            "--limit", type=int, metavar="N", help="At most N runs, most recently updated first."
        )
        parser.add_argument(
            "--run", nargs="+", default=[], metavar="ID", help="Only these runs (any status)."
        )
        parser.add_argument(
            "--export", metavar="RUN_ID", help="Write this run's history as JSON; replay nothing."
        )
        parser.add_argument(
            "--output", metavar="FILE", help="With --export: write to FILE, not standard output."
        )
        parser.add_argument(
            "--database",
            default=DEFAULT_DB_ALIAS,
            help="The database alias weft's tables live on (default: 'default').",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        using = options["database"]
        if options["export"] is not None:
            self._export(options["export"], options["output"], using)
            return
        if options["output"] is not None:
            raise CommandError("--output goes with --export RUN_ID.")
        limit = options["limit"]
        if limit is not None and limit < 1:
            raise CommandError(f"--limit must be at least 1, not {limit}.")
        runs = runs_to_check(
            workflows=options["workflow"],
            statuses=options["status"] or IN_FLIGHT,
            run_ids=options["run"],
            limit=limit,
            using=using,
        )
        outcomes = check_runs(runs, using=using, report=self._report)
        ok = sum(1 for outcome in outcomes if outcome.ok)
        failed = len(outcomes) - ok
        found = {outcome.run_id for outcome in outcomes}
        for run_id in options["run"]:
            if run_id not in found:
                self.stdout.write(f"{run_id}: no such run")
                failed += 1
        if not options["run"]:
            for name, version, count in unserved_pending(
                workflows=options["workflow"], using=using
            ):
                self.stdout.write(
                    f"{count} pending run(s) of {name} v{version}: CANNOT REPLAY: not "
                    "registered in this code"
                )
                failed += 1
        summary = f"replayed {len(outcomes)} run(s): {ok} ok"
        if failed:
            raise CommandError(f"{summary}, {failed} diverge or cannot replay", returncode=1)
        self.stdout.write(summary)

    def _report(self, outcome: ReplayOutcome) -> None:
        self.stdout.write(outcome.line())

    def _export(self, run_id: str, output: str | None, using: str) -> None:
        history = export_history(run_id, using=using)
        if history is None:
            raise CommandError(f"No workflow run {run_id!r}.")
        text = json.dumps(history, cls=DjangoJSONEncoder, indent=2, ensure_ascii=False)
        if output is None:
            self.stdout.write(text)
            return
        with open(output, "w", encoding="utf-8") as out:
            out.write(text + "\n")
        count = len(history["events"])
        self.stdout.write(f"wrote the history of {run_id!r} ({count} events) to {output}")
