"""Throughput of SubsetSelection, HadamardResponse and HRR (randomize and aggregate).

Run from the repository root::

    PYTHONPATH=src python benchmarks/subset_hadamard.py [--n 1000000] [--repeats 3] [--out PATH]

Prints a table (users/s for randomize, reports/s for aggregate, best of ``--repeats``) and
writes the figures as JSON. Also times SubsetSelection's Floyd sampler written with numpy
array operations only, the variant the compiled kernel replaced, so the reason for numba
stays measurable.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from ldpkit import HRR, HadamardResponse, SubsetSelection

ORACLES = (SubsetSelection, HadamardResponse, HRR)
DOMAINS = (64, 1024)
EPSILON = 1.0


def best_time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def numpy_floyd_subsets(
    values: np.ndarray, d: int, k: int, p: float, gen: np.random.Generator
) -> np.ndarray:
    """SubsetSelection's sampler as plain numpy array steps (one step per member, vectorized
    over the users of a chunk), packing at the end: the baseline for the numba kernel."""
    out = np.empty((values.shape[0], (d + 7) // 8), dtype=np.uint8)
    chunk = 2048  # measured best for this variant (the boolean work matrix stays in cache)
    others = d - 1
    for start in range(0, values.shape[0], chunk):
        v = values[start : start + chunk]
        c = v.shape[0]
        rows = np.arange(c)
        included = gen.random(c) < p
        chosen = np.zeros((c, d), dtype=bool)
        for step in range(k):
            j = others - k + step
            t = gen.integers(0, j + 1, size=c)
            t += t >= v
            pick = np.where(chosen[rows, t], j + (j >= v), t)
            if step == 0:
                pick = np.where(included, v, pick)  # included users skip the first step
            chosen[rows, pick] = True
        chosen[rows, v] = included
        out[start : start + c] = np.packbits(chosen, axis=1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("results/subset_hadamard.json"))
    args = parser.parse_args()

    rows = []
    for d in DOMAINS:
        values = np.random.default_rng(0).integers(0, d, args.n)
        for cls in ORACLES:
            spec = cls(epsilon=EPSILON, domain_size=d)
            spec.aggregate(spec.randomize(values[:100], rng=0))  # compile / warm up
            reports = spec.randomize(values, rng=1)
            t_rand = best_time(
                lambda spec=spec, values=values: spec.randomize(values, rng=1), args.repeats
            )
            t_agg = best_time(lambda spec=spec, r=reports: spec.aggregate(r), args.repeats)
            report_bytes = sum(a.nbytes for a in reports.arrays.values()) / args.n
            rows.append(
                {
                    "oracle": cls.name,
                    "domain_size": d,
                    "epsilon": EPSILON,
                    "n": args.n,
                    "randomize_s": t_rand,
                    "aggregate_s": t_agg,
                    "randomize_users_per_s": args.n / t_rand,
                    "aggregate_reports_per_s": args.n / t_agg,
                    "report_bytes": report_bytes,
                }
            )
        spec = SubsetSelection(epsilon=EPSILON, domain_size=d)
        k = spec.effective_subset_size
        t_np = best_time(
            lambda values=values, d=d, k=k, p=spec.p: numpy_floyd_subsets(
                values, d, k, p, np.random.default_rng(1)
            ),
            1,
        )
        rows.append(
            {
                "oracle": "SubsetSelection[numpy-only sampler]",
                "domain_size": d,
                "epsilon": EPSILON,
                "n": args.n,
                "randomize_s": t_np,
                "aggregate_s": None,
                "randomize_users_per_s": args.n / t_np,
                "aggregate_reports_per_s": None,
                "report_bytes": float((d + 7) // 8),
            }
        )

    header = f"{'oracle':<38}{'d':>6}{'randomize users/s':>20}{'aggregate reports/s':>22}{'bytes/report':>14}"
    print(f"n = {args.n:,}, epsilon = {EPSILON}, best of {args.repeats}")
    print(header)
    print("-" * len(header))
    for r in rows:
        agg = f"{r['aggregate_reports_per_s']:,.0f}" if r["aggregate_reports_per_s"] else "-"
        print(
            f"{r['oracle']:<38}{r['domain_size']:>6}{r['randomize_users_per_s']:>20,.0f}"
            f"{agg:>22}{r['report_bytes']:>14.1f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
    }
    args.out.write_text(
        json.dumps({"benchmark": "subset_hadamard", "meta": meta, "rows": rows}, indent=2)
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
