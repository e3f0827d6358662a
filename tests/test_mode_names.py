"""The ownership modes' names are spelled once, in ``weft_django.conf``: the
strategy classes take theirs from there, and messages quote them from there."""

from __future__ import annotations

import ast
from pathlib import Path

from weft_django import conf
from weft_django.ownership.modes import (
    STRATEGIES,
    GlobalLeaseOwnership,
    NoOwnership,
    WorkflowLeaseOwnership,
)

PACKAGE = Path(conf.__file__).resolve().parent


def test_the_strategy_registry_covers_exactly_the_modes_of_the_settings() -> None:
    assert tuple(STRATEGIES) == conf.MODES
    expected = {
        conf.WORKFLOW_LEASE: WorkflowLeaseOwnership,
        conf.GLOBAL_LEASE: GlobalLeaseOwnership,
        conf.NO_OWNERSHIP: NoOwnership,
    }
    assert expected == STRATEGIES
    assert conf.DEFAULTS["OWNERSHIP"] == conf.WORKFLOW_LEASE


def spellings(path: Path) -> list[str]:
    """Where ``path`` spells a mode's name: a strategy's ``name = "..."``, the
    hyphenated name anywhere, or a name quoted inside a text."""
    found = []
    quoted = [f"{q}{mode}{q}" for mode in conf.MODES for q in "'\""]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "name" for t in item.targets)
                    and isinstance(item.value, ast.Constant)
                    and item.value.value in conf.MODES
                ):
                    found.append(f"{node.name}.name = {item.value.value!r}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text == conf.WORKFLOW_LEASE or any(q in text for q in quoted):
                found.append(f"line {node.lineno}: {text[:60]!r}")
    return found


def test_only_conf_spells_a_mode_name() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts and path.name != "conf.py"
        for found in [spellings(path)]
        if found
    }
    assert offenders == {}


def test_the_check_finds_a_spelling(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        'class A:\n    name = "none"\n'
        "hint = \"set WEFT['OWNERSHIP'] = 'lease'\"\n"
        'other = "workflow-lease"\n'
        'label = "lease"\n'
    )
    assert len(spellings(sample)) == 3
