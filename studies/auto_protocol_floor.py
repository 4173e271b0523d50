"""The held-out protocol's noise floor on the tuning set, per scoring rule and runs per cell.

Run: ``nice python studies/auto_protocol_floor.py --cache FILE.json [--reps 10 20 30]
[--result RESULT.json]``, from the repository root, after ``benchmarks/auto_distribution.py
--heldout --set tuning --reps 2R --competitor-cache FILE.json`` has filled the competitors'
per-run errors of at least ``2R`` runs per cell (the tuning set only; the test sets are never
read here).

The floor: a method exactly as good as a cell's best competitor (the competitor with the
smallest mean over the protocol's ``R`` runs), measured on ``R`` other runs of its own (fresh
reports: a disjoint block of runs of the cache), is scored against the protocol's ``R`` runs
like AutoDistribution. Every ordered pair of disjoint blocks of ``R`` runs is one replicate.
Two rules: "min" (the former one: the smallest of the four competitors' means) and "cross-fit"
(:func:`auto_distribution.cross_fit`: the competitor best on one half of the runs is the
reference on the other half). With ``--result`` (a benchmark result with AutoDistribution's
per-run errors), AutoDistribution's own score on the first ``R`` runs under both rules.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import auto_distribution as bench

COMPETITORS = bench.COMPETITORS


def _runs(cache: dict[str, Any], cell: str, idx: list[int]) -> dict[str, np.ndarray]:
    """Each competitor's (W1, KS) errors of the runs ``idx`` of one cell, shape (runs, 2)."""
    return {m: np.array([cache[f"{cell}|{r}"][m] for r in idx]) for m in COMPETITORS}


def reference(runs: dict[str, np.ndarray], j: int, rule: str) -> float:
    """The cell's reference error of metric ``j`` under ``rule`` ("min" or "cross-fit")."""
    if rule == "min":
        return min(float(runs[m][:, j].mean()) for m in COMPETITORS)
    reps = next(iter(runs.values())).shape[0]
    half = reps // 2
    a, b = slice(0, half), slice(half, reps)
    pick_a = min(COMPETITORS, key=lambda m: runs[m][a, j].mean())
    pick_b = min(COMPETITORS, key=lambda m: runs[m][b, j].mean())
    return float((runs[pick_a][b, j].sum() + runs[pick_b][a, j].sum()) / reps)


def floor(cache: dict[str, Any], cells: list[str], reps: int, total: int) -> dict[str, Any]:
    """Floor scores of every replicate (ordered pair of disjoint blocks) under both rules."""
    blocks = [list(range(k * reps, (k + 1) * reps)) for k in range(total // reps)]
    out: dict[str, list[tuple[int, float]]] = {"min": [], "cross-fit": []}
    for prot, fresh in itertools.permutations(blocks, 2):
        ratios: dict[str, list[float]] = {"min": [], "cross-fit": []}
        for cell in cells:
            p, f = _runs(cache, cell, prot), _runs(cache, cell, fresh)
            for j in (0, 1):
                best = min(COMPETITORS, key=lambda m: p[m][:, j].mean())
                for rule in ratios:
                    ratios[rule].append(float(f[best][:, j].mean()) / reference(p, j, rule))
        for rule, xs in ratios.items():
            arr = np.array(xs)
            out[rule].append((int((arr <= 1.10).sum()), float(arr.max())))
    return {"cells": 2 * len(cells), "replicates": out}


def auto_score(result: dict[str, Any], reps: int) -> dict[str, tuple[int, float]]:
    """AutoDistribution's cells within 10 % and worst ratio on its first ``reps`` runs."""
    out = {}
    for rule in ("min", "cross-fit"):
        ratios = []
        for row in result["rows"]:
            if row["set"] != "tuning":
                continue
            runs = {m: np.asarray(row[f"{m} runs"])[:reps] for m in COMPETITORS}
            auto = np.asarray(row["Auto runs"])[:reps]
            ratios += [float(auto[:, j].mean()) / reference(runs, j, rule) for j in (0, 1)]
        arr = np.array(ratios)
        out[rule] = (int((arr <= 1.10).sum()), float(arr.max()))
    return out


def main() -> None:
    """Print the floor per runs per cell and rule (and AutoDistribution's score)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True)
    ap.add_argument("--reps", type=int, nargs="+", default=[5, 10, 20, 30])
    ap.add_argument("--result", default=None)
    args = ap.parse_args()
    cache = json.loads(Path(args.cache).read_text())
    cells = sorted({k.rsplit("|", 1)[0] for k in cache if k.startswith("tuning:")})
    total = min(
        sum(1 for r in range(1000) if f"{cell}|{r}" in cache) for cell in cells
    )  # runs every tuning cell has
    result = json.loads(Path(args.result).read_text()) if args.result else None
    print(f"{len(cells)} tuning (data, eps) pairs, {total} cached runs each")
    for reps in args.reps:
        if 2 * reps > total:
            print(f"R = {reps}: needs {2 * reps} cached runs per cell, skipped")
            continue
        res = floor(cache, cells, reps, total)
        for rule, reps_out in res["replicates"].items():
            counts = ", ".join(f"{w} (worst {x:.2f})" for w, x in reps_out)
            print(f"R = {reps:2d} {rule:9s} floor within 10 % of {res['cells']}: {counts}")
        if result is not None:
            for rule, (w, x) in auto_score(result, reps).items():
                print(f"R = {reps:2d} {rule:9s} AutoDistribution: {w}, worst {x:.2f}")


if __name__ == "__main__":
    main()
