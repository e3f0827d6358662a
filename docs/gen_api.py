"""Generate docs/api.md, the API reference, from the package's docstrings.

    python docs/gen_api.py           # rewrite docs/api.md
    python docs/gen_api.py --check   # exit 1 when docs/api.md is out of date

The source is read with ``ast``, never imported, so the output is the same on
every Django version and needs no settings. tests/test_docs.py runs the check.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "weft_django"
TARGET = ROOT / "docs" / "api.md"

# (section title, module file, names in order; None: every public top-level name)
SECTIONS: list[tuple[str, str, list[str] | None]] = [
    ("Defining workflows", "runtime/registry.py", ["workflow"]),
    ("Context", "runtime/context.py", ["Context"]),
    ("Retry policy", "runtime/policy.py", ["RetryPolicy"]),
    ("Handles", "runtime/handles.py", ["ChildHandle", "Update"]),
    (
        "Starting and steering runs",
        "api/runs.py",
        [
            "start", "get_handle", "signal", "cancel", "suspend", "resume", "purge",
            "result", "describe", "WorkflowDescription", "WorkflowHandle",
        ],
    ),
    ("Updates and queries", "api/updates.py", ["update", "query"]),
    ("Testing", "testing.py", ["WorkflowDriver"]),
    ("Django's Tasks API backend", "backends.py", ["WeftTaskBackend", "TaskNotAllowedError"]),
    ("Celery", "beat.py", ["beat_schedule", "beat_entry", "install_periodic_tasks"]),
    ("Errors and warnings", "exceptions.py", None),
]


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    args = ast.unparse(node.args)
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{node.name}({args}){returns}"


def _doc(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    text = ast.get_docstring(node)
    return text.strip() if text else "(no docstring)"


def _public(name: str) -> bool:
    return not name.startswith("_")


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, level: str, owner: str = "") -> str:
    prefix = f"{owner}." if owner else ""
    return f"{level} `{prefix}{_signature(node)}`\n\n{_doc(node)}\n"


def _field_doc(body: list[ast.stmt], index: int) -> str:
    """The string literal right after a class-level annotation (its docstring), if any."""
    following = body[index + 1] if index + 1 < len(body) else None
    if (
        isinstance(following, ast.Expr)
        and isinstance(following.value, ast.Constant)
        and isinstance(following.value.value, str)
    ):
        return ": " + " ".join(following.value.value.split())
    return ""


def _class(node: ast.ClassDef) -> str:
    bases = ", ".join(ast.unparse(base) for base in node.bases)
    out = [f"### class `{node.name}`" + (f" ({bases})" if bases else "") + "\n", _doc(node) + "\n"]
    fields = [
        f"- field `{node.name}.{item.target.id}: {ast.unparse(item.annotation)}`"
        + _field_doc(node.body, index)
        for index, item in enumerate(node.body)
        if isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and _public(item.target.id)
    ]
    if fields:
        out.append("\n".join(fields) + "\n")
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(item.name):
            if any(ast.unparse(d) == "property" for d in item.decorator_list):
                out.append(f"- property `{node.name}.{item.name}`: {_doc(item).splitlines()[0]}\n")
            else:
                out.append(_function(item, "####", node.name))
    return "\n".join(out)


def _render_section(title: str, module: str, names: list[str] | None) -> str:
    tree = ast.parse((PACKAGE / module).read_text())
    nodes = {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    wanted = names if names is not None else [n for n in nodes if _public(n)]
    dotted = "weft_django." + module.removesuffix(".py").replace("/", ".")
    parts = [f"## {title}\n", f"Module `{dotted}`.\n"]
    for name in wanted:
        node = nodes[name]  # a KeyError here: SECTIONS names something that moved
        if isinstance(node, ast.ClassDef):
            parts.append(_class(node))
        else:
            parts.append(_function(node, "###"))
    return "\n".join(parts)


def render() -> str:
    header = (
        "# API reference\n\n"
        "Generated from the docstrings by `python docs/gen_api.py` (do not edit by hand;\n"
        "`tests/test_docs.py` fails when this file is out of date). `import weft_django as\n"
        "weft` gives the public names; the guides are listed in [the index](index.md).\n"
    )
    toc = "\n".join(
        f"- [{title}](#{title.lower().replace(' ', '-').replace(chr(39), '')})"
        for title, _, _ in SECTIONS
    )
    body = "\n".join(_render_section(*section) for section in SECTIONS)
    return f"{header}\n{toc}\n\n{body}".rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if TARGET.read_text() != text:
            print("docs/api.md is out of date: run python docs/gen_api.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
