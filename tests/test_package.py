"""The package's namespace: ``__all__`` names every public name, grouped by use,
and ``dir(weft_django)`` lists exactly those (the lazily loaded verbs included,
none of the module's own imports)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import weft_django
from weft_django import exceptions

#: Errors raised and reported inside weft_django only, never to a caller.
INTERNAL = {"DrainError", "OwnershipMarkerCorruptError", "OwnershipMarkerDeletedError"}


def test_dir_lists_the_public_names_sorted() -> None:
    names = dir(weft_django)
    assert names == sorted(weft_django.__all__)
    for verb in ("start", "signal", "update", "query", "result", "cancel", "describe"):
        assert verb in names
    for leaked in ("Any", "TYPE_CHECKING", "import_module", "annotations"):
        assert leaked not in names


def test_every_name_in_all_resolves_and_is_listed_once() -> None:
    assert len(weft_django.__all__) == len(set(weft_django.__all__))
    for name in weft_django.__all__:
        assert getattr(weft_django, name) is not None


def test_every_error_and_warning_a_caller_can_meet_is_public() -> None:
    raised = {
        name
        for name, value in vars(exceptions).items()
        if inspect.isclass(value)
        and issubclass(value, (exceptions.WeftError, Warning))
        and value.__module__ == exceptions.__name__
    }
    assert raised - INTERNAL - set(weft_django.__all__) == set()


def test_all_is_grouped_by_use() -> None:
    """Each group of ``__all__`` opens with a comment, as in Temporal's SDK."""
    source = Path(weft_django.__file__).read_text()
    groups = [
        line.strip().removeprefix("# ")
        for line in source[source.index("__all__ = [") :].splitlines()
        if line.strip().startswith("# ")
    ]
    assert groups == [
        "Defining workflows",
        "Starting and steering runs (any process)",
        "Errors",
        "Warnings",
    ]
    tree = ast.parse(source)
    assigned = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    ]
    assert len(assigned) == 1  # one list, not appended to elsewhere
