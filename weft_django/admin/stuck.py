"""The overview's "Stuck runs": the query lives in
:mod:`weft_django.inspection.stuck`, shared with ``manage.py weft stuck``;
re-exported here for the admin."""

from __future__ import annotations

from ..inspection.stuck import WINDOW, StuckRun, StuckRuns, stuck_runs

__all__ = ["WINDOW", "StuckRun", "StuckRuns", "stuck_runs"]
