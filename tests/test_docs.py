"""The documentation: docs/api.md matches the docstrings, and every relative
link between the docs and the README points at a file that exists."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_api_reference_is_up_to_date() -> None:
    render = runpy.run_path(str(ROOT / "docs" / "gen_api.py"))["render"]
    assert (ROOT / "docs" / "api.md").read_text() == render(), (
        "docs/api.md is out of date: run python docs/gen_api.py"
    )


def test_relative_links_resolve() -> None:
    broken = []
    for page in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
