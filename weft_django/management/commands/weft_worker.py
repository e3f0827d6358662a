"""``manage.py weft_worker``: a thin wrapper over :class:`weft_django.worker.Worker`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from ...checks.configuration import worker_migration_problem
from ...conf import get_settings
from ...exceptions import WeftConfigurationError, WeftError
from ...worker.host import Worker
from ...worker.logs import ensure_handler
from ...worker.metrics import DEFAULT_METRICS_ADDR


class Command(BaseCommand):
    help = (
        "Run a weft engine: claim workflow runs, drive them, renew claims, reclaim the "
        "runs of crashed workers and deliver signals. Stop with SIGTERM or Ctrl-C."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--concurrency", type=int, default=4, help="executor threads")
        parser.add_argument(
            "--once",
            "--burst",
            action="store_true",
            dest="once",
            help="run until no work is left, then exit 0",
        )
        parser.add_argument("--metrics-port", type=int, default=None, help="serve /metrics")
        parser.add_argument(
            "--metrics-addr",
            default=DEFAULT_METRICS_ADDR,
            metavar="ADDR",
            help=f"the address --metrics-port listens on (default: {DEFAULT_METRICS_ADDR}, "
            "this machine only; 0.0.0.0 or :: for a scraper on another host)",
        )
        parser.add_argument(
            "--log-level",
            default=None,
            choices=["DEBUG", "INFO", "WARNING", "ERROR"],
            help="level of the weft_django loggers (default: INFO when the project's "
            "LOGGING gives them no handler, then a stderr one is added; else as configured)",
        )
        parser.add_argument(
            "--shutdown-grace",
            type=float,
            default=30.0,
            help="seconds running turns get to finish after SIGTERM; then each stops at "
            "its next ctx operation and its claim is released (docs/operations.md)",
        )
        parser.add_argument(
            "--task-queue",
            action="append",
            dest="task_queues",
            default=None,
            metavar="NAME",
            help="serve only this django.tasks queue (repeatable; default: every queue "
            "of the configured WeftTaskBackends; docs/tasks.md)",
        )
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            default=None,
            metavar="NAME",
            help="claim new runs of this flow-control queue only (repeatable; default: "
            "every queue; docs/flow-control.md)",
        )
        parser.add_argument(
            "--no-schedules",
            action="store_false",
            dest="schedules",
            help="never fire cron schedules from this worker (another worker fires them; "
            "docs/schedules.md)",
        )
        parser.add_argument(
            "--status-interval", type=float, default=60.0, help="seconds between status lines"
        )

    def execute(self, *args: Any, **options: Any) -> str | None:
        # Before Django's system checks: invalid WEFT settings get the same one
        # paragraph as every other refusal to start (the checks would list them
        # as weft.E00x too, but as a multi-line report among unrelated checks).
        try:
            get_settings()
        except WeftConfigurationError as exc:
            raise CommandError(
                f"weft_worker cannot start: {exc} Nothing was written to the database."
            ) from exc
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        # No handler configured for weft_django (e.g. no LOGGING setting): one on
        # stderr; otherwise the project's setup, with --log-level as its level.
        ensure_handler(options["log_level"])
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        if options["task_queues"]:
            select_task_queues(options["task_queues"])
        if options["queues"]:
            select_queues(options["queues"])
        unmigrated = worker_migration_problem()  # weft.E018: never start on old tables
        if unmigrated:
            raise CommandError(
                f"weft_worker cannot start: {unmigrated} Nothing was written to the database."
            )
        try:
            worker = Worker(
                concurrency=options["concurrency"],
                once=options["once"],
                metrics_port=options["metrics_port"],
                metrics_addr=options["metrics_addr"],
                shutdown_grace=options["shutdown_grace"],
                status_interval=options["status_interval"],
                schedules=options["schedules"],
            )
            code = worker.run()
        except WeftConfigurationError as exc:
            raise CommandError(
                f"weft_worker cannot start: {exc} Nothing was written to the database."
            ) from exc
        except WeftError as exc:
            raise CommandError(f"weft_worker stopped: {exc}") from exc
        except DatabaseError as exc:
            raise CommandError(
                f"weft_worker stopped on a database error it cannot retry ({exc}). Check "
                "DATABASES (or DATABASE_URL) and that the database is reachable and migrated."
            ) from exc
        if code:
            raise CommandError(
                "weft_worker gave up: it could not renew its engine lease for "
                f"{worker.watch.exit_after:g}s, so it may have been deposed. A process "
                "supervisor (systemd, Kubernetes, ...) should start it again."
            )


def select_queues(names: list[str]) -> None:
    """``--queue``: claim new runs of these flow-control queues only."""
    from ...flow.settings import queues
    from ...runtime import registry

    known = set(queues())
    unknown = sorted(set(names) - known)
    if unknown:
        raise CommandError(
            f"--queue {', '.join(unknown)}: not a queue of WEFT['QUEUES'] (the queues are: "
            f"{', '.join(sorted(known))})."
        )
    registry.serve_queues(names)


def select_task_queues(queues: list[str]) -> None:
    """``--task-queue``: keep only those queues' ``django.tasks.<queue>`` workflows."""
    from ...checks import extras

    if not extras.task_backend_aliases() or not extras.has_django_tasks():
        raise CommandError(
            "--task-queue needs a WeftTaskBackend in TASKS (Django >= 6.0; docs/tasks.md)."
        )
    from django.tasks import task_backends

    from ...backends import serve_only

    known = {q for alias in extras.task_backend_aliases() for q in task_backends[alias].queues}
    unknown = sorted(set(queues) - known)
    if unknown:
        raise CommandError(
            f"--task-queue {', '.join(unknown)}: not a queue of the configured "
            f"WeftTaskBackends (they have: {', '.join(sorted(known))})."
        )
    serve_only(queues)
