"""The package's import graph: no cycles, and data flows one way (docs/architecture.md).

Layers, top to bottom: hosts (worker, admin, commands, test driver, checks),
the public verbs (api, updates, and operations: the audited operator verbs
that api's verbs call), the runtime, the ownership protocol, storage (models,
settings, errors). A module may import its own layer or a lower one, never a
higher one; imports made only for type checking count too.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
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


# The layer of each part of the package, by its dotted path under weft_django
# (the longest prefix wins). A wing (worker/, retention/) is one feature, and its
# modules sit on the layers of what they do.
LAYER_OF_PATH = {
    "": "public",  # the package itself re-exports the public API
    "models": "storage",
    "conf": "storage",
    "exceptions": "storage",
    "stored_json": "storage",
    "migrations": "storage",
    "retention.settings": "storage",
    "ownership": "ownership",
    "retention.lease": "ownership",
    "runtime": "runtime",
    "retention": "runtime",  # the pruner and its statistics
    # operations: the audited operator verbs, which api's verbs call (so beside
    # it, never importing it); the admin and commands call both.
    "api": "public",
    "operations": "public",
    # schedules: cron parsing and declarations beside the settings, the lease in
    # ownership, the firing pass and the audited operations beside api (they start
    # runs through it); the worker's thread and the admin are hosts.
    "schedules.cron": "storage",
    "schedules.declare": "storage",
    "schedules.lease": "ownership",
    "schedules.metrics": "ownership",
    "schedules": "public",
    # recovery: retry, fork, cancel with children (audited like operations, above it).
    "recovery": "public",
    # inspection: the read queries the admin and the console share (below both).
    "inspection": "public",
    # console: manage.py weft's subcommands (a host, beside the admin).
    "console": "hosts",
    # flow: flow control (docs/flow-control.md). Its settings beside the others,
    # the slots and rate cells (fenced shared state) with ownership, the gate a
    # turn passes in the runtime.
    "flow.settings": "storage",
    "flow.slots": "ownership",
    "flow.rate": "ownership",
    "flow.admission": "ownership",
    "flow.overview": "ownership",
    "flow.metrics": "ownership",
    "flow": "runtime",
}


def layer_of(module: str) -> str:
    rest = module.split(".")[1:]
    for size in range(len(rest), -1, -1):
        layer = LAYER_OF_PATH.get(".".join(rest[:size]))
        if layer is not None and (size or not rest):
            return layer
    return "hosts"  # worker, testing, admin, management, checks, apps, beat, tasks, backends


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
    assert "weft_django.ownership" in GRAPH["weft_django.runtime.engine"]


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


def _ownership_imports(module: str, path: Path) -> list[tuple[str, list[str]]]:
    """(the ownership module, the names) of each import of ``module`` into ownership."""
    found = []
    parts = module.split(".")
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [
                (a.name, []) for a in node.names if a.name.startswith("weft_django.ownership")
            ]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[: len(parts) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "weft_django.ownership" or target.startswith("weft_django.ownership."):
                found.append((target, [alias.name for alias in node.names]))
    return found


def test_the_rest_of_the_package_uses_the_ownership_face_only() -> None:
    """Outside ``weft_django/ownership/``, the protocol is imported from the package
    itself, and only the names its ``__all__`` lists (its face)."""
    import weft_django.ownership as face

    offenders = []
    for module, path in modules().items():
        if module.startswith("weft_django.ownership"):
            continue
        for target, names in _ownership_imports(module, path):
            if target != "weft_django.ownership":
                offenders.append(f"{module} imports {target}")
            offenders += [f"{module} imports {name}" for name in names if name not in face.__all__]
    assert offenders == []


def test_the_ownership_face_lists_what_it_loads() -> None:
    import weft_django.ownership as face

    assert sorted(face.__all__) == sorted(face._FACE)
    for name in face.__all__:
        assert getattr(face, name) is not None, name


@pytest.mark.parametrize(
    "package", ["weft_django", "weft_django.ownership", "weft_django.retention"]
)
def test_importing_a_package_face_loads_no_models(package: str) -> None:
    """``import weft_django`` (as Django does while loading apps, before the
    registry is ready) imports no models, and neither do the ownership face and
    the retention wing's package; a fresh interpreter shows it."""
    code = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        "loaded = sorted(m for m in sys.modules if m.startswith('weft_django')); "
        "print('weft_django.models' in sys.modules, loaded)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "example_project.settings"}
    out = subprocess.run(
        [sys.executable, "-c", code, package],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=PACKAGE.parent,
    ).stdout
    assert out.startswith("False"), out


def test_the_wings_hold_their_features() -> None:
    """The worker host and the retention feature each live in their own package."""
    assert {p.stem for p in (PACKAGE / "worker").glob("*.py")} >= {
        "host",
        "pool",
        "supervision",
        "shutdown",
        "prune_thread",
        "logs",
    }
    assert {p.stem for p in (PACKAGE / "retention").glob("*.py")} >= {
        "settings",
        "pruner",
        "stats",
        "lease",
    }
    leftovers = {
        "worker",
        "pool",
        "supervision",
        "shutdown",
        "prune_worker",
        "worker_logs",
        "retention_settings",
        "checks",
        "extras",
        "updates",
        "worker_metrics",
    }
    assert sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem in leftovers) == []
