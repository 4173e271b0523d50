"""Every ```python block of README.md and docs/**/*.md runs, as a reader would paste it.

The blocks of one file run in order in one shared namespace, in a scratch directory (so
files the examples write, such as ``day1.parquet``, land there). A block whose first line is
exactly ``# doctest: skip`` is only compiled, not run: the opt-out for code that cannot run
in a test (starting a server, a path on the reader's machine); say why on the next line.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_MARKER = "# doctest: skip"
# A fenced block: ``` + "python" alone on the opening line, up to the closing fence.
_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number of the opening fence, code) of every ```python block of a file."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_documents_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in documents()}
    assert {"README.md", "docs/collector.md", "docs/design/ARCHITECTURE.md"} <= names
    assert python_blocks(ROOT / "README.md"), "the README's flow block is gone"


def test_block_parser():
    text = "intro\n```python\nx = 1\n```\n```bash\nls\n```\n```python\n# doctest: skip\nboom\n```\n"
    assert [m.group(1) for m in _BLOCK.finditer(text)] == ["x = 1\n", "# doctest: skip\nboom\n"]


@pytest.mark.parametrize(
    "path",
    [p for p in documents() if python_blocks(p)],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_python_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # a module of its own, so that a block may define a dataclass (which looks its module up)
    module = types.ModuleType("docs_" + re.sub(r"\W", "_", path.stem))  # importable by pickle
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, object] = module.__dict__
    name = path.relative_to(ROOT).as_posix()
    for line, code in python_blocks(path):
        where = f"{name}, block at line {line}"
        compiled = compile(code, where, "exec")  # skipped blocks must still be valid Python
        if code.splitlines()[0].strip() == SKIP_MARKER:
            continue
        try:
            exec(compiled, namespace)
        except Exception as exc:
            pytest.fail(f"{where} raised {type(exc).__name__}: {exc}")
