"""Measured coverage of the 95% confidence intervals of the numerical estimates.

For each mechanism, data set (Beta(5, 2); flights' departure times, sampled with replacement
from the 328,521 flights, both on [0, 1]), n in {1e5, 1e6} and epsilon in {1, 2}: ``reps``
independent runs of the whole pipeline (randomize, aggregate, estimate), and the fraction
of 95% intervals that cover the truth, per query family:

* ``cdf``: ``cdf_interval`` at the truth's 9 deciles; ``range``: ``range_interval`` of
  [q10, q50], [q25, q75], [q50, q90]; ``mean``: ``mean_interval``; ``quantile``:
  ``quantile_interval`` at 0.1, 0.5, 0.9.
* The truth of a Distribution's query is the population's histogram on the mechanism's
  buckets (its estimand); of a mean mechanism, the population mean.

Square Wave (EM/EMS) offers no interval (NaN with an IntervalWarning): listed, not measured.

Run: ``nice python benchmarks/interval_coverage.py [--reps 100 25] [--out FILE]`` (about
10 minutes on one idle core with the defaults). Writes a Markdown table (stdout and --out).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
from scipy import stats as sps

from ldpkit.datasets import flights_departure_time
from ldpkit.estimate import IntervalWarning
from ldpkit.numeric import (
    CFOBinning,
    Distribution,
    HaarHRR,
    HierarchicalHistogram,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
)

QS = np.array([0.1, 0.5, 0.9])
RANGES = [(0.1, 0.5), (0.25, 0.75), (0.5, 0.9)]


def mechanisms(eps: float) -> list:
    return [
        CFOBinning(epsilon=eps, buckets=64),
        HierarchicalHistogram(epsilon=eps, buckets=256),
        HaarHRR(epsilon=eps, buckets=256),
        StochasticRounding(epsilon=eps, low=0.0, high=1.0),
        PiecewiseMechanism(epsilon=eps, low=0.0, high=1.0),
        HybridMechanism(epsilon=eps, low=0.0, high=1.0),
    ]


def populations() -> dict:
    flights = flights_departure_time().normalized().values
    beta = sps.beta(5, 2)
    return {
        "Beta(5,2)": (
            lambda rng, n: rng.beta(5, 2, size=n),
            lambda b: Distribution.from_cdf(beta.cdf, 0.0, 1.0, b),
            5.0 / 7.0,
        ),
        "flights": (
            lambda rng, n: flights[rng.integers(0, flights.size, size=n)],
            lambda b: Distribution.from_values(flights, 0.0, 1.0, b),
            float(flights.mean()),
        ),
    }


def one_cell(spec, draw, truth_of, true_mean, n: int, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    hits: dict[str, list[bool]] = {"cdf": [], "range": [], "mean": [], "quantile": []}
    truth = truth_of(spec.buckets) if hasattr(spec, "buckets") else None
    for _ in range(reps):
        est = spec.run(draw(rng, n), rng=rng)
        if truth is None:  # a mean mechanism
            lo, hi = est.mean_interval(0.05)
            hits["mean"].append(lo <= true_mean <= hi)
            continue
        xs = truth.quantile(np.linspace(0.1, 0.9, 9))
        lo, hi = est.cdf_interval(xs)
        t = truth.cdf(xs)
        hits["cdf"].extend((lo <= t) & (t <= hi))
        for qa, qb in RANGES:
            a, b = truth.quantile(qa), truth.quantile(qb)
            lo, hi = est.range_interval(a, b)
            hits["range"].append(lo <= truth.range(a, b) <= hi)
        lo, hi = est.mean_interval()
        hits["mean"].append(lo <= truth.mean() <= hi)
        lo, hi = est.quantile_interval(QS)
        t = truth.quantile(QS)
        hits["quantile"].extend((lo <= t) & (t <= hi))
    return {k: (float(np.mean(v)), len(v)) for k, v in hits.items() if v}


def fmt(cell: dict, key: str) -> str:
    if key not in cell:
        return ""
    cover, _count = cell[key]
    return f"{100 * cover:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, nargs=2, default=[100, 25], metavar=("SMALL", "LARGE"))
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    pops = populations()
    lines = [
        "| mechanism | data | n | eps | reps | cdf | range | mean | quantile |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    t0 = time.perf_counter()
    seed = 0
    for n in args.n:
        reps = args.reps[0] if n <= 100_000 else args.reps[1]
        for eps in args.eps:
            for data, (draw, truth_of, true_mean) in pops.items():
                for spec in mechanisms(eps):
                    seed += 1
                    cell = one_cell(spec, draw, truth_of, true_mean, n, reps, seed)
                    row = (
                        f"| {type(spec).__name__} | {data} | {n:.0e} | {eps:g} | {reps} | "
                        + " | ".join(fmt(cell, k) for k in ("cdf", "range", "mean", "quantile"))
                        + " |"
                    )
                    lines.append(row)
                    print(row, flush=True)
    # Square Wave + EM/EMS: no interval is offered (checked once)
    sw = SquareWave(epsilon=1.0, buckets=64).run(np.random.default_rng(0).beta(5, 2, 10_000))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IntervalWarning)
        nan = math.isnan(sw.mean_interval()[0])
    lines.append(
        f"| SquareWave (EM/EMS) | any | | | | not offered: NaN ({nan}) with "
        f"IntervalWarning ({bool(caught)}) | | | |"
    )
    print(lines[-1])
    print(f"\n{time.perf_counter() - t0:.0f} s", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
