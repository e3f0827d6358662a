"""The package's import graph: no cycles, and data flows one way (docs/architecture.md).

Layers, top to bottom: hosts (worker, admin, commands, test driver, checks),
the public verbs (api, updates, and operations: the audited operator verbs
that api's verbs call), the runtime, the ownership protocol, storage (models,
settings, errors). A module may import its own layer or a lower one, never a
higher one; imports made only for type checking count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "weft_django"

LAYERS = {
    "storage": 0,
    "ownership": 1,
    "runtime": 2,
    "public": 3,
    "hosts": 4,
}


def layer_of(module: str) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return "public"  # the package itself re-exports the public API
    if parts[0] in (
        "models",
        "conf",
        "retention_settings",
        "exceptions",
        "migrations",
        "stored_json",
    ):
        return "storage"
    if parts[0] in ("ownership", "runtime"):
        return parts[0]
    # operations: the audited operator verbs, which api's verbs call (so beside
    # it, never importing it); the admin and commands call both.
    if parts[0] in ("api", "updates", "operations"):
        return "public"
    return "hosts"  # worker, pool, testing, admin, management, checks, apps


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = ["weft_django", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules ``module`` imports (at any level, TYPE_CHECKING included)."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            base = module.split(".")
            if node.level:
                is_package = path.name == "__init__.py"
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # ``from pkg import sub`` imports the submodule; ``from mod import name``
            # needs ``mod`` itself (its parents are initialised first either way).
            names = [
                f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix
                for alias in node.names
            ]
        else:
            continue
        targets.update(name for name in names if name in known and name != module)
    return targets


GRAPH = {name: imports(name, path, modules()) for name, path in modules().items()}


def test_the_graph_is_read() -> None:
    assert "weft_django.runtime.engine" in GRAPH
    assert "weft_django.ownership.modes" in GRAPH["weft_django.runtime.engine"]


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components: every one must be a single module."""
    graph = GRAPH
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_never_go_up_a_layer(module: str) -> None:
    rank = LAYERS[layer_of(module)]
    upward = sorted(t for t in GRAPH[module] if LAYERS[layer_of(t)] > rank)
    assert upward == [], f"{module} ({layer_of(module)}) imports a higher layer: {upward}"


def test_only_the_strategy_classes_ask_which_mode_is_configured() -> None:
    """No comparison with a mode's name, and no MODE_* constant, outside the strategy
    classes and their factory (adding a mode means adding one class)."""
    modes = {"workflow-lease", "lease", "none"}
    strategies = PACKAGE / "ownership" / "modes"
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts or path.parent == strategies:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for operand in operands:
                    values = (
                        operand.elts
                        if isinstance(operand, (ast.Tuple, ast.List, ast.Set))
                        else [operand]
                    )
                    if any(isinstance(v, ast.Constant) and v.value in modes for v in values):
                        offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            if isinstance(node, ast.Name) and node.id.startswith("MODE_"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.id}")
    assert offenders == []
