"""``manage.py weft_marker``: show or repair the store-wide ownership-mode marker.

Without options it prints the marker (mode, established_at, established_by),
whether it decodes and matches ``WEFT['OWNERSHIP']``, and the live engines.
``--reset [--mode MODE]`` replaces the marker (with ``WEFT['OWNERSHIP']`` when
no mode is given), which is the repair path the boot gates point to; it
refuses while any engine has a live lease, and asks for confirmation unless
``--yes`` is given. The marker row is read and replaced by
:mod:`weft_django.ownership.gates` (``raw_marker``, ``reset_marker``), with
raw SQL, so a corrupt row is shown and can be replaced, never half-decoded.
"""

from __future__ import annotations

import socket
import sys
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS

from ...conf import DEFAULTS, MODES, Timing, get_settings
from ...exceptions import WeftConfigurationError
from ...models import Engine
from ...ownership import (
    MarkerResetRefused,
    live_engines,
    ownership_class,
    raw_marker,
    read_marker,
    reset_marker,
)


def _engine_line(engine: Engine) -> str:
    return (
        f"  {engine.id}  host={engine.hostname} pid={engine.pid} kind={engine.kind} "
        f"mode={engine.ownership_mode} status={engine.status} "
        f"lease_expires_at={engine.lease_expires_at.isoformat()}"
    )


class Command(BaseCommand):
    help = (
        "Show the ownership-mode marker and the live engines; with --reset --mode MODE, "
        "replace the marker once every engine is stopped."
    )
    stealth_options = ("stdin",)
    # A repair tool: it must run (and say what is wrong) even when WEFT is invalid.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Replace the marker (refused while any engine has a live lease).",
        )
        parser.add_argument(
            "--mode",
            choices=MODES,
            help="The ownership mode to establish with --reset (default: WEFT['OWNERSHIP']).",
        )
        parser.add_argument(
            "--yes", action="store_true", help="Do not ask for confirmation before --reset."
        )
        parser.add_argument(
            "--database",
            default=DEFAULT_DB_ALIAS,
            help="The database alias (default: %(default)s).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        using: str = options["database"]
        if options["mode"] and not options["reset"]:
            raise CommandError("--mode is only used with --reset.")
        self.show(using)
        if options["reset"]:
            self.reset(
                options["mode"] or self.configured_mode_for_reset(),
                using=using,
                assume_yes=options["yes"],
                stdin=options.get("stdin") or sys.stdin,
            )

    def timing(self) -> Timing:
        """What judges the engines' leases; with invalid settings, the default claim timing."""
        try:
            settings = get_settings()
            return ownership_class(settings.ownership).timing_of(settings)
        except WeftConfigurationError:
            return Timing(float(DEFAULTS["CLAIM_TTL"]), float(DEFAULTS["CLAIM_RENEW_INTERVAL"]))

    def live_engines(self, using: str) -> list[Engine]:
        return list(live_engines(using=using, timing=self.timing()))

    # -- show ---------------------------------------------------------------------

    def show(self, using: str) -> None:
        raw = raw_marker(using=using)
        if raw is None:
            marking = " or ".join(repr(m) for m in MODES if ownership_class(m).uses_marker)
            self.stdout.write(
                "Ownership-mode marker: absent (the next engine to boot in mode "
                f"{marking} establishes it)."
            )
        else:
            mode, established_at, established_by = raw
            self.stdout.write("Ownership-mode marker:")
            self.stdout.write(f"  mode:           {mode!s}")
            self.stdout.write(f"  established_at: {established_at!s}")
            self.stdout.write(f"  established_by: {established_by or '-'}")
            try:
                read_marker(using=using)
            except WeftConfigurationError as exc:
                self.stdout.write(self.style.ERROR(f"  CORRUPT: {exc}"))
        try:
            configured = get_settings().ownership
        except WeftConfigurationError as exc:
            self.stdout.write(self.style.WARNING(f"Configured mode: unknown ({exc})"))
        else:
            note = ""
            marked = ownership_class(configured).uses_marker
            if raw is not None and raw[0] in MODES and marked and configured != raw[0]:
                note = " (DIFFERS from the marker: engines will refuse to boot)"
            self.stdout.write(f"Configured mode (WEFT['OWNERSHIP']): {configured}{note}")
        engines = self.live_engines(using)
        if engines:
            self.stdout.write(f"Live engines ({len(engines)}):")
            for engine in engines:
                self.stdout.write(_engine_line(engine))
        else:
            self.stdout.write("Live engines: none")

    # -- reset --------------------------------------------------------------------

    def configured_mode_for_reset(self) -> str:
        """``--reset`` without ``--mode`` re-establishes ``WEFT['OWNERSHIP']``."""
        try:
            mode = get_settings().ownership
        except WeftConfigurationError as exc:
            raise CommandError(
                f"--reset without --mode uses WEFT['OWNERSHIP'], but the settings are "
                f"invalid: {exc}"
            ) from exc
        if not ownership_class(mode).uses_marker:
            raise CommandError(
                f"WEFT['OWNERSHIP'] is {mode!r}, which uses no marker: pass --mode explicitly."
            )
        return mode

    def reset(self, mode: str, *, using: str, assume_yes: bool, stdin: TextIO) -> None:
        engines = self.live_engines(using)
        if engines:
            lines = "\n".join(_engine_line(engine) for engine in engines)
            raise CommandError(
                f"Refusing to reset the ownership-mode marker: {len(engines)} engine(s) "
                f"still have a live lease:\n{lines}\nStop them (and wait for their "
                "leases to expire) first."
            )
        if not assume_yes and not self.confirm(mode, stdin):
            raise CommandError("Reset cancelled; the marker is unchanged.")
        by = f"weft_marker@{socket.gethostname()}"[:64]
        try:
            state = reset_marker(mode, timing=self.timing(), established_by=by, using=using)
        except MarkerResetRefused:
            raise CommandError(
                "An engine started while resetting; the marker is unchanged. Run again."
            ) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Ownership-mode marker reset to {mode!r} at "
                f"{state.established_at.isoformat()} by {by}."
            )
        )

    def confirm(self, mode: str, stdin: TextIO) -> bool:
        isatty = getattr(stdin, "isatty", None)
        if not (callable(isatty) and isatty()):
            raise CommandError(
                "Refusing to reset the marker without confirmation: pass --yes, or run "
                "the command from a terminal."
            )
        self.stdout.write(
            f"Replace the ownership-mode marker with mode {mode!r}? Every engine on this "
            "database must be stopped. Type 'yes' to continue: ",
            ending="",
        )
        self.stdout.flush()
        answer = stdin.readline()
        return answer.strip().lower() == "yes"
