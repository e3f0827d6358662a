"""A scratch project for ``manage.py`` subprocess tests: the example project's
settings plus a few lines of a test's own, on a SQLite file of the test's own
(never the pytest test database), in ``tmp_path``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.integration.helpers import REPO, run_manage, worker_env

MODULE = "scratch_settings"


class Scratch:
    """``manage.py`` in a scratch project; :meth:`run` returns the finished process."""

    def __init__(self, tmp_path: Path, settings: str = "") -> None:
        (tmp_path / f"{MODULE}.py").write_text(
            f"from example_project.settings import *  # noqa: F403\n\n{settings}\n"
        )
        self.database = tmp_path / "scratch.sqlite3"
        self.env = worker_env(f"sqlite:///{self.database}", settings=MODULE)
        path = [str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)

    def run(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return run_manage(list(args), self.env, timeout=timeout)


def explained(stderr: str) -> str:
    """What a refusing command printed on stderr: something, and no traceback."""
    text = stderr.strip()
    assert text, "no explanation on stderr"
    assert "Traceback" not in text, text
    return text
