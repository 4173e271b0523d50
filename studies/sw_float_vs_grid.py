"""SquareWave on the exact grid law vs the float sampler it replaced.

Both samplers run in this one process on the same data and seeds: the float sampler is
SW20's continuous one as ldpkit had it before the grid law (one float uniform for the branch,
one for the position; reports bucketized on [-b, 1 + b], EM/EMS on
``wave_bucket_matrix``), re-created here; the grid sampler is today's
``SquareWave.randomize`` with its exact ``bucket_matrix()``. Same estimator code (``em``,
``ems``) for both. Target: W1 and KS of the grid within 2% of the float sampler's on
Beta(5, 2) (256 buckets) and the flights departure times (1024 buckets), n = 1e5 and 1e6.

Also times (CPU) the first and the second ``SquareWave.estimate`` at n = 1e6, 1024 buckets
(after loading the compiled EM kernels): the first one builds the exact bucket matrix.

Run ``python studies/sw_float_vs_grid.py [--reps R] [--out FILE]``; prints one JSON line
per run and a summary table (mean +- standard error over the repetitions).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np


def float_sw_counts(v: np.ndarray, eps: float, buckets: int, gen: np.random.Generator) -> Any:
    """The pre-issue-11 float SW sampler, bucketized; returns (counts, matrix)."""
    from ldpkit.numeric.square_wave import square_wave_bandwidth, wave_bucket_matrix

    b = square_wave_bandwidth(eps)
    e = math.exp(eps)
    q = 1.0 / (2.0 * b * e + 1.0)
    p = e * q
    u = gen.random(v.size)
    near = u < 2.0 * b * p
    w = gen.random(v.size)
    y = np.where(near, v - b + 2.0 * b * w, -b + w)
    far = ~near
    y[far] += np.where(y[far] >= v[far] - b, 2.0 * b, 0.0)
    idx = ((y + b) / (1.0 + 2.0 * b) * buckets).astype(np.int64)
    np.clip(idx, 0, buckets - 1, out=idx)
    counts = np.bincount(idx, minlength=buckets)
    return counts, wave_bucket_matrix(b, 1.0, q, buckets, buckets)


def datasets() -> dict[str, tuple[np.ndarray, float, float, int]]:
    from ldpkit.datasets import load

    flights = load("flights_departure_time")
    return {
        "beta52": (np.random.default_rng(12345).beta(5, 2, 1_000_000), 0.0, 1.0, 256),
        "flights": (np.asarray(flights.values, dtype=np.float64), *flights.domain, 1024),
    }


def first_estimate_cpu(eps: float = 1.0, n: int = 1_000_000, buckets: int = 1024) -> dict:
    from ldpkit.numeric import SquareWave

    data = np.random.default_rng(0).beta(5, 2, n)
    # Load the compiled EM kernels first (numba's cache load is a one-time cost per
    # process, ~0.7 s CPU, unrelated to the grid): what remains is the matrix build.
    small = SquareWave(epsilon=eps, buckets=8)
    small.estimate(small.aggregate(small.randomize(data[:1000], rng=0)))
    sw = SquareWave(epsilon=eps, buckets=buckets)
    stats = sw.aggregate(sw.randomize(data, rng=1))
    t0 = time.process_time()
    sw.estimate(stats)
    first = time.process_time() - t0
    t0 = time.process_time()
    sw.estimate(stats)
    second = time.process_time() - t0
    return {"first_cpu_s": first, "second_cpu_s": second, "ratio": first / second}


def main() -> None:
    from ldpkit.metrics import ks_distance, wasserstein
    from ldpkit.numeric import Distribution, SquareWave
    from ldpkit.numeric.em import em, ems

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--out", default="benchmarks/results/sw_float_vs_grid.jsonl")
    args = parser.parse_args()
    print(json.dumps({"first_estimate": first_estimate_cpu()}), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with out.open("w") as fh:
        for name, (pop, low, high, d) in datasets().items():
            for n in args.sizes:
                for eps in args.eps:
                    sw = SquareWave(epsilon=eps, low=low, high=high, buckets=d)
                    grid_matrix = np.asarray(sw.bucket_matrix())
                    for rep in range(args.reps):
                        data = np.random.default_rng(rep).choice(pop, n)
                        unit = (data - low) / (high - low)
                        fc, fm = float_sw_counts(unit, eps, d, np.random.default_rng(rep + 100))
                        gc = sw.aggregate(sw.randomize(data, rng=rep + 100)).counts
                        truth = data
                        for method, fn, tol in (
                            ("ems", ems, 1e-3),
                            ("em", em, 1e-3 * math.exp(eps)),
                        ):
                            row = {"data": name, "n": n, "eps": eps, "rep": rep, "method": method}
                            for label, counts, m in (("float", fc, fm), ("grid", gc, grid_matrix)):
                                est = fn(counts, m, tol=tol, low=low, high=high)
                                assert isinstance(est, Distribution)
                                row[f"w1_{label}"] = wasserstein(est, truth) / (high - low)
                                row[f"ks_{label}"] = ks_distance(est, truth)
                            rows.append(row)
                            fh.write(json.dumps(row) + "\n")
                            fh.flush()
                            print(json.dumps(row), flush=True)
    summarize(rows)


def summarize(rows: list[dict[str, Any]]) -> None:
    keys = sorted({(r["data"], r["n"], r["eps"], r["method"]) for r in rows})
    print(
        f"{'data':8} {'n':>8} {'eps':>4} {'est':>4} {'W1 float':>18} {'W1 grid':>18} "
        f"{'ratio':>6} {'KS float':>18} {'KS grid':>18} {'ratio':>6}"
    )

    def ms(x: list[float]) -> str:
        a = np.asarray(x)
        se = a.std(ddof=1) / math.sqrt(a.size) if a.size > 1 else float("nan")
        return f"{a.mean():.5f}+-{se:.5f}"

    for key in keys:
        sel = [r for r in rows if (r["data"], r["n"], r["eps"], r["method"]) == key]
        wf, wg = [r["w1_float"] for r in sel], [r["w1_grid"] for r in sel]
        kf, kg = [r["ks_float"] for r in sel], [r["ks_grid"] for r in sel]
        print(
            f"{key[0]:8} {key[1]:8d} {key[2]:4g} {key[3]:>4} {ms(wf):>18} {ms(wg):>18} "
            f"{np.mean(wg) / np.mean(wf):6.3f} {ms(kf):>18} {ms(kg):>18} "
            f"{np.mean(kg) / np.mean(kf):6.3f}"
        )


if __name__ == "__main__":
    main()
