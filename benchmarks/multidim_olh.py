"""Per-cell error bars of FullDomain and CALM with OLH: MSE / reported variance and coverage.

Run: ``python benchmarks/multidim_olh.py`` (quick: 40 runs, eps 1) or ``--full`` (240 runs,
eps 1 and 4; CALM a third of the runs: its exact projection variances cost more; n = 4000). For every 2-way marginal cell, over independent runs on the same users: the
mean squared error against the true frequency divided by the mean reported variance, and
the share of runs whose 95 % interval holds the truth. Reported: the mean of the ratio over
cells, its worst cell, the mean and extreme coverages, side by side for OLH hashing the
cell index (``mix_items=False``, the earlier wire format) and a fixed bijective mix of it
(``mix_items=True``). Data: the 8 yes/no flight questions and 6 categorical flight
attributes of ``benchmarks/multidim.py``, and CPS 2005 (5 attributes); small n, so that
hundreds of runs fit. Only ``--full`` writes docs/results/multidim_olh.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit.multidim import CALM, FullDomain

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from multidim import _source  # noqa: E402  (the data sets of the multidim benchmark)


def cell_rows(spec: Any, x: np.ndarray, sizes: tuple[int, ...], runs: int) -> dict:
    """Return per-cell MSE / variance and coverage over ``runs`` runs of ``spec``."""
    n, d = x.shape
    pairs = list(itertools.combinations(range(d), 2))
    truth = np.concatenate(
        [
            (
                np.histogramdd(x[:, list(p)], bins=[np.arange(sizes[a] + 1) for a in p])[0] / n
            ).ravel()
            for p in pairs
        ]
    )
    se = np.zeros(truth.size)
    var = np.zeros(truth.size)
    hits = np.zeros(truth.size)
    gen = np.random.default_rng(11)
    for _ in range(runs):
        est = spec.estimate(spec.aggregate(spec.randomize(x, rng=gen)))
        tables = [est.marginal(p) for p in pairs]
        t = np.concatenate([m.table.ravel() for m in tables])
        v = np.concatenate([m.variance.ravel() for m in tables])
        se += (t - truth) ** 2
        var += v
        hits += np.abs(t - truth) <= 1.959964 * np.sqrt(v)
    ratio = se / np.maximum(var, 1e-300)
    cover = hits / runs
    return {
        "cells": int(truth.size),
        "ratio_mean": float(ratio.mean()),
        "ratio_min": float(ratio.min()),
        "ratio_max": float(ratio.max()),
        "pooled_ratio": float(se.sum() / var.sum()),
        "coverage_mean": float(cover.mean()),
        "coverage_min": float(cover.min()),
        "coverage_max": float(cover.max()),
    }


def specs(source: str, eps: float, sizes: tuple[int, ...], mix: bool) -> list[tuple[str, Any]]:
    """Return the (name, spec) pairs measured on one data set."""
    extra = {"mix_items": mix}
    out: list[tuple[str, Any]] = []
    if math.prod(sizes) <= 4096:  # OLH's aggregation costs n x the product domain
        out.append(
            ("FullDomain-olh", FullDomain(epsilon=eps, domain_sizes=sizes, oracle="olh", **extra))
        )
    out.append(("CALM-olh", CALM(epsilon=eps, domain_sizes=sizes, **extra)))
    return out


def markdown(rows: list[dict]) -> str:
    """Return the results table (one row per data set, epsilon, method and hash)."""
    rows = sorted(rows, key=lambda r: (r["source"], r["epsilon"], r["method"], r["hash"] != "old"))
    lines = [
        "# FullDomain and CALM with OLH: per-cell MSE / reported variance and coverage\n",
        "Every 2-way marginal cell; per cell, over independent runs on the same users: MSE /",
        "mean reported variance, and the share of runs whose 95 % interval holds the truth.",
        "hash: old = the cell index hashed (mix_items=False), mixed = its fmix32 key.\n",
        "| data | n | eps | method | ell | hash | runs | cells | MSE/var mean | min | max "
        "| coverage mean | min | max |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['source']} | {r['n']} | {r['epsilon']} | {r['method']} | {r['ell'] or ''} | "
            f"{r['hash']} | {r['runs']} | {r['cells']} | {r['ratio_mean']:.3f} | "
            f"{r['ratio_min']:.2f} | {r['ratio_max']:.2f} | {r['coverage_mean']:.3f} | "
            f"{r['coverage_min']:.3f} | {r['coverage_max']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure and print (and with ``--full`` write) the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="240 runs, eps 1 and 4")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--variants", default="old,mixed")
    ap.add_argument("--sources", default="flights-binary,cps,flights")
    ap.add_argument("--eps", default=None)
    args = ap.parse_args()
    runs = args.runs or (240 if args.full else 40)
    epsilons = (
        [float(e) for e in args.eps.split(",")]
        if args.eps
        else ([1.0, 4.0] if args.full else [1.0])
    )
    rows = []
    for source in args.sources.split(","):
        x, sizes = _source(source, args.n)
        for eps in epsilons:
            for variant in args.variants.split(","):
                for name, spec in specs(source, eps, sizes, variant == "mixed"):
                    r = {
                        "source": source,
                        "n": int(x.shape[0]),
                        "epsilon": eps,
                        "method": name,
                        "hash": variant,
                        "ell": getattr(spec, "ell", None),
                        "runs": runs,
                    }
                    # CALM's exact projection variances cost more per run: fewer runs
                    reps = runs if name.startswith("FullDomain") else max(1, runs // 3)
                    r["runs"] = reps
                    r.update(cell_rows(spec, x, sizes, reps))
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    if args.full:  # quick runs never rewrite docs/results
        (ROOT.parent / "docs" / "results" / "multidim_olh.md").write_text(markdown(rows))


if __name__ == "__main__":
    main()
