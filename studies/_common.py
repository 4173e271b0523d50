"""The benchmarks' small helpers (``benchmarks/_common.py``: timing, tables, JSON output),
for the studies, which run as scripts from the repository root like the benchmarks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "_common.py"
_spec = importlib.util.spec_from_file_location("_benchmarks_common", _PATH)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

Column = _module.Column
RESULTS = _module.RESULTS
machine = _module.machine
print_table = _module.print_table
timed = _module.timed
write_json = _module.write_json
