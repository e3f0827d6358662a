"""Run a Markdown page's code blocks against a scratch Django project.

A page is read top to bottom and each fenced ``python`` or ``bash`` block is
run in a fresh ``django-admin startproject`` project (with one app, ``shop``,
the app the docs' examples live in), in the order the page shows them:

- a ``python`` block whose first line is ``# settings.py`` is appended to the
  project's settings; ``NAME = [..., x]`` extends the list the project has;
- a ``python`` block whose first line is ``# <path>.py`` writes that file in the
  project (``# <path>.py (continued)`` appends to it); a file named
  ``test_*.py`` is then run with pytest (pytest-django, the project's settings);
- any other ``python`` block runs in ``manage.py shell``; an expression line
  ending in ``# -> <literal>`` must evaluate to that literal;
- a ``bash`` block runs line by line: ``python manage.py ...`` in the project,
  ``weft_worker`` without ``--once``/``--burst`` in the background until the
  page ends (then SIGTERM); any other command is an error, so a page that shows
  one must say why it is not run.

A block preceded by ``<!-- docs-test: skip (reason) -->`` is not run; the
reason is required. Blocks in other languages (tables, layouts) are ignored.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "DocsExampleError", "DocsProject", "parse_blocks", "with_checks"]

ROOT = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
FILE_HEADER = re.compile(
    r"^#\s*(?P<path>[\w./-]+\.py)(?P<continued>\s+\(continued\))?\s*(?:\(.*\))?$"
)
EXPECT = re.compile(r"^(?P<code>\S.*?)\s+#\s*->\s*(?P<value>.+)$")
EXTEND = re.compile(r"^(?P<name>[A-Z_]+)\s*=\s*\[\s*\.\.\.\s*,", re.MULTILINE)
COMMAND_TIMEOUT = 120


class DocsExampleError(AssertionError):
    """A code block of a page did not run as the page says it does."""


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip_reason: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse_blocks(text: str, page: str = "<page>") -> list[Block]:
    """The fenced blocks of a Markdown text, with their skip markers."""
    blocks: list[Block] = []
    lines = text.splitlines()
    index = 0
    previous = ""
    while index < len(lines):
        line = lines[index]
        fence = re.match(r"^(```+)\s*(\w*)\s*$", line)
        if not fence:
            if line.strip():
                previous = line.strip()
            index += 1
            continue
        marker, lang = fence.group(1), fence.group(2)
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != marker:
            body.append(lines[index])
            index += 1
        skip = SKIP.fullmatch(previous)
        if "docs-test" in previous and skip is None:
            raise DocsExampleError(f"{page}:{start + 1}: malformed docs-test marker {previous!r}")
        blocks.append(
            Block(
                page,
                start + 1,
                lang,
                "\n".join(body) + "\n",
                skip.group("reason") if skip else None,
            )
        )
        previous = ""
        index += 1
    return blocks


def with_checks(code: str) -> str:
    """``expr  # -> literal`` lines become checks that ``expr == literal``."""
    out = []
    for line in code.splitlines():
        match = EXPECT.match(line)
        if match is None:
            out.append(line)
            continue
        expr, value = match.group("code"), match.group("value").strip()
        try:
            ast.parse(expr, mode="eval")
            expected = ast.literal_eval(value)
        except (SyntaxError, ValueError) as exc:
            raise DocsExampleError(f"cannot check {line.strip()!r}: {exc}") from exc
        out.append(f"__docs_check({expr}, {expected!r}, {line.strip()!r})")
    return "\n".join(out) + "\n"


CHECK_PRELUDE = textwrap.dedent(
    """
    def __docs_check(got, expected, line):
        if got != expected:
            raise SystemExit(f"docs example {line!r} gave {got!r}, the page says {expected!r}")
    """
)


@dataclass
class DocsProject:
    """A scratch project the blocks of one page run in."""

    directory: Path
    python: str = sys.executable
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker_argv: list[list[str]] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._run([self.python, "-m", "django", "startproject", "proj", "."])
        self._run([self.python, "manage.py", "startapp", "shop"])
        # The page assumes an app of the reader's own; the scratch project's is shop.
        self.settings.write_text(
            self.settings.read_text().replace(
                "INSTALLED_APPS = [", 'INSTALLED_APPS = [\n    "shop",', 1
            )
        )

    @property
    def settings(self) -> Path:
        return self.directory / "proj" / "settings.py"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "WEFT_"))}
        env["DJANGO_SETTINGS_MODULE"] = "proj.settings"
        env["PYTHONPATH"] = os.pathsep.join([str(self.directory), str(ROOT)])
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _run(self, argv: list[str], *, stdin: str | None = None, what: str = "") -> str:
        done = subprocess.run(
            argv,
            cwd=self.directory,
            env=self.env,
            input=stdin.encode() if stdin is not None else None,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
        )
        output = (done.stdout + done.stderr).decode(errors="replace")
        if done.returncode != 0:
            raise DocsExampleError(
                f"{what or shlex.join(argv)} exited {done.returncode}:\n"
                f"{output}{self.worker_logs()}"
            )
        return output

    def run_page(self, blocks: list[Block]) -> None:
        try:
            for block in blocks:
                if block.lang not in {"python", "bash"} or block.skip_reason is not None:
                    continue
                if block.lang == "bash":
                    self.run_bash(block)
                else:
                    self.run_python(block)
                self.ran.append(block.where)
        finally:
            self.stop()

    def run_python(self, block: Block) -> None:
        first = block.code.splitlines()[0].strip() if block.code.strip() else ""
        if first.startswith("# settings.py"):
            code = EXTEND.sub(lambda m: f"{m.group('name')} = [*{m.group('name')},", block.code)
            with self.settings.open("a") as settings:
                settings.write("\n" + code)
            return
        header = FILE_HEADER.match(first)
        if header:
            path = self.directory / header.group("path")
            path.parent.mkdir(parents=True, exist_ok=True)
            mode = "a" if header.group("continued") else "w"
            with path.open(mode) as target:
                target.write(block.code if mode == "w" else "\n" + block.code)
            self.restart_workers()  # as a deploy of the new code would
            if path.name.startswith("test_"):
                self._run(
                    [
                        self.python,
                        "-m",
                        "pytest",
                        "-q",
                        "-p",
                        "pytest_django",
                        "--ds=proj.settings",
                        "-p",
                        "no:cacheprovider",
                        str(path),
                    ],
                    what=f"pytest of {block.where}",
                )
            return
        self._run(
            [
                self.python,
                "manage.py",
                "shell",
                "--no-imports",
                "-c",
                CHECK_PRELUDE + with_checks(block.code),
            ],
            what=f"the python block at {block.where}",
        )

    def run_bash(self, block: Block) -> None:
        for raw in block.code.splitlines():
            line = re.sub(r"\s+#.*$", "", raw).strip()
            if not line or line.startswith("#"):
                continue
            argv = shlex.split(line)
            if argv[:2] != ["python", "manage.py"]:
                raise DocsExampleError(
                    f"{block.where}: {line!r} is not a manage.py command; "
                    "mark the block <!-- docs-test: skip (reason) -->"
                )
            argv[0] = self.python
            if argv[2] == "weft_worker" and not {"--once", "--burst"} & set(argv):
                self.worker_argv.append(argv)
                self.start_worker(argv)
                continue
            self._run(argv, what=f"{line!r} at {block.where}")

    def start_worker(self, argv: list[str]) -> None:
        with (self.directory / f"worker-{len(self.background)}.log").open("ab") as log:
            self.background.append(
                subprocess.Popen(argv, cwd=self.directory, env=self.env, stdout=log, stderr=log)
            )

    def restart_workers(self) -> None:
        if self.background:
            self.stop()
            for argv in self.worker_argv:
                self.start_worker(argv)

    def worker_logs(self) -> str:
        logs = sorted(self.directory.glob("worker-*.log"))
        return "".join(f"\n--- {log.name}\n{log.read_text(errors='replace')}" for log in logs)

    def stop(self) -> None:
        for process in self.background:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.background:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.background.clear()
