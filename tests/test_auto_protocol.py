"""The held-out protocol's cross-fitted scoring rule (benchmarks/auto_distribution.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench() -> Any:
    """Import benchmarks/auto_distribution.py (it imports ``_common`` from its folder)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(
            "_bench_auto_distribution", ROOT / "benchmarks" / "auto_distribution.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


BENCH = _bench()


def _row(runs: dict[str, np.ndarray]) -> dict[str, Any]:
    """A held-out row as run_cell writes it: per-run errors, means, min-rule ratios."""
    row: dict[str, Any] = {}
    for m, arr in runs.items():
        row[f"{m} runs"] = arr.tolist()
        row[f"{m} W1"], row[f"{m} KS"] = float(arr[:, 0].mean()), float(arr[:, 1].mean())
    for metric in ("W1", "KS"):
        best = min(row[f"{m} {metric}"] for m in BENCH.COMPETITORS)
        row[f"best {metric}"] = best
        row[f"best {metric} by"] = min(BENCH.COMPETITORS, key=lambda m: row[f"{m} {metric}"])
        for m in BENCH.METHODS:
            row[f"{m} {metric} ratio"] = row[f"{m} {metric}"] / best
    return row


def test_cross_fit_reference_is_the_other_halfs_pick_exactly() -> None:
    # Four runs, halves {0, 1} and {2, 3}. W1: SW-EMS is best on the first half (1, 1 against
    # 2, 2) and HH on the second (1, 1 against 4, 4), so the reference is HH on runs 0-1
    # (3, 3) and SW-EMS on runs 2-3 (4, 4): (3 + 3 + 4 + 4) / 4 = 3.5.
    w1 = {
        "SW-EMS": [1, 1, 4, 4],
        "SW-EM": [5, 5, 5, 5],
        "HH": [3, 3, 1, 1],
        "Wavelet J-2": [6, 6, 6, 6],
        "Auto": [2, 3, 4, 5],
    }
    runs = {m: np.column_stack([np.array(v, float), np.full(4, 2.0)]) for m, v in w1.items()}
    row = _row(runs)
    assert row["Auto W1 ratio"] == 3.5 / 2.0  # the former rule: min of the means (HH, 2)
    BENCH.cross_fit(row)
    assert row["best W1"] == 3.5
    assert row["best W1 by"] == "SW-EMS+HH"
    assert row["Auto W1 ratio"] == 3.5 / 3.5
    assert row["Auto W1 min-rule ratio"] == 3.5 / 2.0
    assert row["HH W1 ratio"] == 2.0 / 3.5
    # KS: every method has error 2 on every run: the reference is 2, every ratio 1.
    assert row["best KS"] == 2.0 and row["Auto KS ratio"] == 1.0
    assert row["best KS by"] == "SW-EMS"  # ties: the first competitor, on both halves


def test_cross_fit_needs_two_runs() -> None:
    row = _row({m: np.ones((1, 2)) for m in BENCH.METHODS})
    with pytest.raises(ValueError, match="reps must be >= 2"):
        BENCH.cross_fit(row)


def _references(rule: str, cells: int, reps: int, seed: int) -> np.ndarray:
    """Reference errors of cells where all four competitors have true error 1 (CV 0.25)."""
    gen = np.random.default_rng(seed)
    refs = np.empty(cells)
    for c in range(cells):
        runs = {m: gen.gamma(16.0, 1 / 16.0, size=(reps, 2)) for m in BENCH.METHODS}
        row = _row(runs)
        if rule == "cross-fit":
            BENCH.cross_fit(row)
        refs[c] = row["best W1"]
    return refs


def _unbiased(refs: np.ndarray, reps: int) -> bool:
    """Whether the mean reference is 1 within 5 standard errors (per run: sd 0.25)."""
    se = 0.25 / np.sqrt(reps) / np.sqrt(refs.size)
    return bool(abs(refs.mean() - 1.0) <= 5 * se)


def test_cross_fit_reference_is_unbiased_when_the_competitors_tie() -> None:
    # Every competitor's true error is 1: a method as good as the best should score 1 on
    # average. The cross-fitted reference is a mean of runs that did not pick it: unbiased.
    assert _unbiased(_references("cross-fit", 2000, 10, seed=1), 10)


def test_min_rule_reference_fails_the_same_check() -> None:
    # The minimum of four noisy means is biased low (about -1 sd of a mean, here -8 %):
    # the check above fails for it, so it can tell the two rules apart.
    refs = _references("min", 2000, 10, seed=1)
    assert not _unbiased(refs, 10)
    assert refs.mean() < 0.95
