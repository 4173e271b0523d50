"""The benchmarks' small helpers (``benchmarks/_common.py``: timing, tables, JSON output),
for the studies, which run as scripts from the repository root like the benchmarks."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(path: Path, name: str) -> ModuleType:
    """Import the script at ``path`` as a module called ``name`` (benchmarks, studies)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_module = load_script(BENCHMARKS / "_common.py", "_benchmarks_common")

Column = _module.Column
RESULTS = _module.RESULTS
machine = _module.machine
print_table = _module.print_table
timed = _module.timed
write_json = _module.write_json
