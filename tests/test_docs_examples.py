"""The README's and getting-started's code blocks run as shown (tests/docs_examples.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.docs_examples import ROOT, DocsExampleError, DocsProject, parse_blocks, with_checks

PAGES = ["README.md", "docs/getting-started.md"]


@pytest.mark.parametrize("page", PAGES)
def test_page_code_blocks_run(page: str, tmp_path: Path) -> None:
    if os.environ.get("DATABASE_URL"):
        pytest.skip("the docs' examples run on a fresh startproject's SQLite, in the SQLite pass")
    blocks = parse_blocks((ROOT / page).read_text(), page)
    runnable = [b for b in blocks if b.lang in {"python", "bash"} and b.skip_reason is None]
    assert runnable, f"{page} has no runnable blocks"
    project = DocsProject(tmp_path / "site")
    project.run_page(blocks)
    assert project.ran == [b.where for b in runnable]


@pytest.mark.parametrize("page", PAGES)
def test_every_skip_gives_a_reason(page: str) -> None:
    for block in parse_blocks((ROOT / page).read_text(), page):
        if block.skip_reason is not None:
            assert block.skip_reason.strip(), block.where


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    project = DocsProject(tmp_path / "site")
    page = "```python\n1 + 1   # -> 3\n```\n"
    with pytest.raises(DocsExampleError, match="gave 2, the page says 3"):
        project.run_page(parse_blocks(page))


def test_checks_and_markers_are_parsed() -> None:
    assert "__docs_check(f(1), {'a': 1}" in with_checks('f(1)   # -> {"a": 1}\n')
    assert with_checks("x = 1  # a comment\n") == "x = 1  # a comment\n"
    blocks = parse_blocks(
        "<!-- docs-test: skip (needs a broker) -->\n```bash\ncelery -A p worker\n```\n"
    )
    assert blocks[0].skip_reason == "needs a broker"
    with pytest.raises(DocsExampleError, match="malformed"):
        parse_blocks("<!-- docs-test: skip -->\n```bash\nx\n```\n")


def test_unknown_commands_must_be_marked(tmp_path: Path) -> None:
    project = DocsProject(tmp_path / "site")
    with pytest.raises(DocsExampleError, match=r"not a manage\.py command"):
        project.run_page(parse_blocks("```bash\npip install something\n```\n"))
