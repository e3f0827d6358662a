"""Generate docs/api.md, the API reference, from the package's docstrings.

    python docs/gen_api.py           # rewrite docs/api.md
    python docs/gen_api.py --check   # exit 1 when docs/api.md is out of date

Both exit 1, naming the entries, when a public name listed here has no
docstring (nothing is written then): every entry of the reference says what it
does. The source is read with ``ast``, never imported, so the output is the
same on every Django version and needs no settings. tests/test_docs.py runs the
check.
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
            "WorkflowHandle",
        ],
    ),
    ("Reading runs", "api/reads.py", ["result", "describe", "WorkflowDescription"]),
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


#: The entries the last :func:`render` found without a docstring, as ``module: name``.
MISSING: list[str] = []


def _doc(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, where: str) -> str:
    text = ast.get_docstring(node)
    if not text or not text.strip():
        MISSING.append(where)
        return "(no docstring)"
    return text.strip()


def _summary(text: str) -> str:
    """The first paragraph of a docstring, on one line (a property's entry)."""
    return " ".join(text.split("\n\n")[0].split())


def _public(name: str) -> bool:
    return not name.startswith("_")


def _function(
    node: ast.FunctionDef | ast.AsyncFunctionDef, level: str, module: str, owner: str = ""
) -> str:
    prefix = f"{owner}." if owner else ""
    doc = _doc(node, f"{module}: {prefix}{node.name}")
    return f"{level} `{prefix}{_signature(node)}`\n\n{doc}\n"


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


def _class(node: ast.ClassDef, module: str) -> str:
    bases = ", ".join(ast.unparse(base) for base in node.bases)
    out = [
        f"### class `{node.name}`" + (f" ({bases})" if bases else "") + "\n",
        _doc(node, f"{module}: {node.name}") + "\n",
    ]
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
                doc = _summary(_doc(item, f"{module}: {node.name}.{item.name}"))
                out.append(f"- property `{node.name}.{item.name}`: {doc}\n")
            else:
                out.append(_function(item, "####", module, node.name))
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
            parts.append(_class(node, module))
        else:
            parts.append(_function(node, "###", module))
    return "\n".join(parts)


def render() -> str:
    """The text of docs/api.md; fills :data:`MISSING`."""
    MISSING.clear()
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


def missing_docstrings() -> list[str]:
    """The public names of the reference that have no docstring (empty: none)."""
    render()
    return list(MISSING)


def main() -> int:
    text = render()
    if MISSING:
        print(
            f"{len(MISSING)} public name(s) of the API reference have no docstring "
            "(weft_django/" + ", weft_django/".join(MISSING) + "): write one for each.",
            file=sys.stderr,
        )
        return 1
    if "--check" in sys.argv[1:]:
        if TARGET.read_text() != text:
            print("docs/api.md is out of date: run python docs/gen_api.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
