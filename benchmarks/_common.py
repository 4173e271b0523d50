"""Small helpers shared by the benchmark scripts (timing, tables, JSON output)."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def machine() -> dict[str, Any]:
    import os

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def write_json(name: str, rows: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **(extra or {}), "rows": rows}, indent=2))
    return path


#: A table column: (row key, header) with the default cell format (:func:`_fmt`), or
#: (row key, header, how) with ``how`` a format spec (e.g. ".3f") or a function of the value.
Column = tuple[str, str] | tuple[str, str, str | Callable[[Any], str]]


def print_table(title: str, rows: list[dict[str, Any]], columns: list[Column]) -> None:
    """Print rows with rich when available (it is a dependency), else plain text."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for _, header, *_how in columns:
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(*[_fmt(row.get(key), *how) for key, _, *how in columns])
    Console(width=200).print(table)


def _fmt(value: Any, how: str | Callable[[Any], str] | None = None) -> str:
    if value is None:
        return "-"
    if callable(how):
        return how(value)
    if how is not None:
        return format(value, how)
    if isinstance(value, str) and len(value) > 60:
        return value[:57] + "..."
    if isinstance(value, float):
        if value == 0 or 1e-3 <= abs(value) < 1e4:
            return f"{value:.3g}"
        return f"{value:.3g}"
    return str(value)
