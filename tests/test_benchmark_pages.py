"""Results pages that are re-rendered from part files keep what a partial run did not redo."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(
            f"_bench_{name}", ROOT / "benchmarks" / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_sets_page_keeps_sections_whose_parts_did_not_all_run(capsys):
    sets = _load("sets")
    page = (ROOT / "docs" / "results" / "sets" / "sets.md").read_text(encoding="utf-8")
    assert sets.render({}, page) == page
    # One key-value part alone: the section is carried over whole, with a message.
    blob = {"n": 10**6, "repeats": 5, "machine": {"date": "today"}, "rows": [{"data": "x"}]}
    assert sets.render({"kvml": blob}, page) == page
    assert "run every part of it (kvpaper, kvml, kvzipf, kvregime)" in capsys.readouterr().out
    # A section whose parts all ran is re-rendered from them, with their part lines.
    tp = {**blob, "rows": [{"users": 10**6, "seconds": 1.0}]}
    fresh = sets.render({"throughput": tp}, page)
    assert "`python benchmarks/sets.py --parts throughput` on today" in fresh
    assert "| users | seconds |\n|---|---|\n| 1000000 | 1 |" in fresh
    assert fresh.split("## Key-value")[1] == page.split("## Key-value")[1]
