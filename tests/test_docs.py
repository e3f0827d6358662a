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


def test_the_reference_lists_the_fields_of_handles_and_descriptions() -> None:
    """``ChildHandle.id`` (and every dataclass field) is in docs/api.md, with the
    string literal under the field as its description."""
    text = (ROOT / "docs" / "api.md").read_text()
    assert (
        "- field `ChildHandle.id: str`: The child run's id (``workflow_id``, or "
        '``"<parent id>/child-<seq>"``).'
    ) in text
    assert "- field `WorkflowHandle.id: str`" in text
    assert "- field `WorkflowDescription.parent_id: str`" in text
    assert "_waiter" not in text  # private fields stay out


def test_readme_lists_every_system_check() -> None:
    ids = {
        found
        for path in (ROOT / "weft_django").rglob("*.py")
        for found in re.findall(r"\"(weft\.[EW]\d{3})\"", path.read_text())
    }
    row = re.compile(r"^\| `(weft\.[EW]\d{3})` \|", re.M)
    readme = set(row.findall((ROOT / "README.md").read_text()))
    operations = set(row.findall((ROOT / "docs" / "operations.md").read_text()))
    assert ids and readme == ids, sorted(ids ^ readme)
    assert ids <= operations, sorted(ids - operations)


def test_every_public_name_in_the_reference_has_a_docstring() -> None:
    """docs/gen_api.py refuses a public name without a docstring: none renders
    as "(no docstring)" in docs/api.md."""
    missing = runpy.run_path(str(ROOT / "docs" / "gen_api.py"))["missing_docstrings"]()
    assert missing == [], f"public names without a docstring: {missing}"
    assert "(no docstring)" not in (ROOT / "docs" / "api.md").read_text()


PACKAGE = ROOT / "weft_django"


def _map_entries(text: str) -> list[str]:
    """The paths in the first column of docs/architecture.md's package map; a bare
    file name takes the folder of the first path in its row."""
    section = text.split("## Package map", 1)[1].split("\n## ", 1)[0]
    entries = []
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        paths = re.findall(r"`([^`]+)`", row.split("|")[1])
        folder = paths[0].rsplit("/", 1)[0] + "/" if "/" in paths[0].rstrip("/") else ""
        entries += [p if "/" in p else folder + p for p in paths]
    return entries


def test_the_architecture_map_names_every_module_and_only_modules_that_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    entries = _map_entries(text)
    missing = [entry for entry in entries if not (PACKAGE / entry).exists()]
    assert missing == [], f"docs/architecture.md maps modules that do not exist: {missing}"
    folders = [entry for entry in entries if entry.endswith("/")]
    unmapped = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if (path.name != "__init__.py" or path.parent == PACKAGE)
        and str(path.relative_to(PACKAGE)) not in entries
        and not any(str(path.relative_to(PACKAGE)).startswith(folder) for folder in folders)
    ]
    assert unmapped == [], f"modules missing from docs/architecture.md's package map: {unmapped}"


def test_every_file_path_in_the_docs_exists() -> None:
    """Paths named anywhere in the README and the docs (the architecture page's
    rules table, the benchmarks' tests, ...) are real files of the package or the
    repository."""
    stale = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for path in set(re.findall(r"`((?:[\w.]+/)+\w+\.py)`", page.read_text())):
            if not any((base / path).exists() for base in (PACKAGE, ROOT, ROOT / "docs")):
                stale.append(f"{page.relative_to(ROOT)}: {path}")
    assert sorted(stale) == []


def test_every_public_name_has_an_entry_in_the_reference() -> None:
    """Each name of ``weft_django.__all__`` is a heading of docs/api.md (a name
    added to the package but not to ``gen_api.py``'s sections fails here)."""
    import weft_django

    text = (ROOT / "docs" / "api.md").read_text()
    headings = set(re.findall(r"^###+ (?:class )?`(\w+)", text, flags=re.M))
    missing = sorted(set(weft_django.__all__) - headings)
    assert not missing, f"add them to docs/gen_api.py's SECTIONS: {missing}"
