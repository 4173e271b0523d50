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
* Square Wave (``SW-EM``, ``SW-EMS``): intervals from the parametric bootstrap of the
  whole pipeline (``Distribution.bootstrap``) with ``--boot`` replicates per run.

Run: ``nice python benchmarks/interval_coverage.py [--reps 100 25] [--only SW-EMS ...]
[--boot 100] [--budget 600] [--jsonl FILE] [--out FILE]``; ``--pool FILE ...`` prints the
pooled table of JSONL files written before (e.g. two runs with different ``--seed``). Progress goes to stderr. Every cell stops after
``--budget`` seconds of CPU time (the rows say how many runs it made), so the run time is
bounded by the number of cells times the budget.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats as sps

from ldpkit.datasets import flights_departure_time
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
FAMILIES = ("cdf", "range", "mean", "quantile")


def mechanisms(eps: float, sw_buckets: int) -> list[tuple[str, Any, str | None]]:
    """(label, spec, EM method or None)."""
    sw = SquareWave(epsilon=eps, buckets=sw_buckets)
    return [
        ("CFOBinning", CFOBinning(epsilon=eps, buckets=64), None),
        ("HierarchicalHistogram", HierarchicalHistogram(epsilon=eps, buckets=256), None),
        ("HaarHRR", HaarHRR(epsilon=eps, buckets=256), None),
        ("StochasticRounding", StochasticRounding(epsilon=eps, low=0.0, high=1.0), None),
        ("PiecewiseMechanism", PiecewiseMechanism(epsilon=eps, low=0.0, high=1.0), None),
        ("HybridMechanism", HybridMechanism(epsilon=eps, low=0.0, high=1.0), None),
        ("SW-EM", sw, "em"),
        ("SW-EMS", sw, "ems"),
    ]


def populations() -> dict[str, tuple[Callable[..., np.ndarray], Callable[[int], Any], float]]:
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


def one_cell(
    spec: Any,
    method: str | None,
    draw: Callable[..., np.ndarray],
    truth_of: Callable[[int], Any],
    true_mean: float,
    n: int,
    reps: int,
    seed: int,
    boot: int,
    budget: float,
    label: str,
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    hits: dict[str, list[bool]] = {k: [] for k in FAMILIES}
    truth = truth_of(spec.buckets) if hasattr(spec, "buckets") else None
    t0 = time.process_time()
    done = 0
    for rep in range(reps):
        if done and time.process_time() - t0 > budget:
            break
        stats = spec.aggregate(spec.randomize(draw(rng, n), rng=rng))
        est = spec.estimate(stats) if method is None else spec.estimate(stats, method=method)
        if method is not None:
            est = est.bootstrap(boot, rng=rng)
        done += 1
        print(
            f"\r  {label} n={n:.0e}: run {rep + 1}/{reps}, {time.process_time() - t0:.0f} s CPU",
            end="",
            file=sys.stderr,
            flush=True,
        )
        if truth is None:  # a mean mechanism
            lo, hi = est.mean_interval(0.05)
            hits["mean"].append(bool(lo <= true_mean <= hi))
            continue
        xs = truth.quantile(np.linspace(0.1, 0.9, 9))
        lo, hi = est.cdf_interval(xs)
        t = truth.cdf(xs)
        hits["cdf"].extend(((lo <= t) & (t <= hi)).tolist())
        for qa, qb in RANGES:
            a, b = truth.quantile(qa), truth.quantile(qb)
            lo, hi = est.range_interval(a, b)
            hits["range"].append(bool(lo <= truth.range(a, b) <= hi))
        lo, hi = est.mean_interval()
        hits["mean"].append(bool(lo <= truth.mean() <= hi))
        lo, hi = est.quantile_interval(QS)
        t = truth.quantile(QS)
        hits["quantile"].extend(((lo <= t) & (t <= hi)).tolist())
    print(file=sys.stderr)
    return {
        "runs": done,
        "cpu": time.process_time() - t0,
        **{k: [int(np.sum(v)), len(v)] for k, v in hits.items() if v},
    }


def fmt(cell: dict[str, Any], key: str) -> str:
    if key not in cell:
        return ""
    hit, count = cell[key]
    return f"{100 * hit / count:.1f}"


def merged(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the same cell (mechanism, data, n, eps) from several runs, counts summed."""
    cells: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        key = (r["mechanism"], r["data"], r["n"], r["eps"])
        cell = cells.setdefault(key, {**dict(zip(("mechanism", "data", "n", "eps"), key)),
                                      "runs": 0, "cpu": 0.0})  # fmt: skip
        cell["runs"] += r["runs"]
        cell["cpu"] += r["cpu"]
        for k in FAMILIES:
            if k in r:
                hit, count = cell.get(k, [0, 0])
                cell[k] = [hit + r[k][0], count + r[k][1]]
    order = {m: i for i, m in enumerate(dict.fromkeys(r["mechanism"] for r in rows))}
    return sorted(
        cells.values(), key=lambda c: (order[c["mechanism"]], c["n"], c["eps"], c["data"])
    )


def pooled(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| mechanism | cdf | range | mean | quantile | lowest cell |",
        "|---|---|---|---|---|---|",
    ]
    for mech in dict.fromkeys(r["mechanism"] for r in rows):
        mine = [r for r in rows if r["mechanism"] == mech]
        cells = []
        lowest = 100.0
        for k in FAMILIES:
            hit = sum(r[k][0] for r in mine if k in r)
            count = sum(r[k][1] for r in mine if k in r)
            cells.append(f"{100 * hit / count:.1f} ({count})" if count else "")
            lowest = min([lowest] + [100 * r[k][0] / r[k][1] for r in mine if k in r])
        out.append(f"| {mech} | " + " | ".join(cells) + f" | {lowest:.1f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, nargs=2, default=[100, 25], metavar=("SMALL", "LARGE"))
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--only", nargs="+", default=None, help="mechanism labels to run")
    parser.add_argument("--boot", type=int, default=100, help="bootstrap replicates (SW)")
    parser.add_argument("--sw-buckets", type=int, default=256)
    parser.add_argument("--budget", type=float, default=1800.0, help="CPU seconds per cell")
    parser.add_argument("--jsonl", default=None, help="append one JSON line per cell")
    parser.add_argument("--out", default=None, help="write the Markdown tables")
    parser.add_argument("--pool", nargs="+", default=None, help="pool JSONL files and exit")
    parser.add_argument("--seed", type=int, default=0, help="base seed (another: more runs)")
    args = parser.parse_args()
    if args.pool:
        rows = merged([json.loads(line) for f in args.pool for line in open(f, encoding="utf-8")])
        print("| mechanism | data | n | eps | runs | cdf | range | mean | quantile |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['mechanism']} | {r['data']} | {r['n']:.0e} | {r['eps']:g} | {r['runs']} | "
                + " | ".join(fmt(r, k) for k in FAMILIES)
                + " |"
            )
        print("\n" + "\n".join(pooled(rows)))
        return
    pops = populations()
    lines = [
        "| mechanism | data | n | eps | runs | cdf | range | mean | quantile |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    seed = args.seed
    for n in args.n:
        reps = args.reps[0] if n <= 100_000 else args.reps[1]
        for eps in args.eps:
            for data, (draw, truth_of, true_mean) in pops.items():
                for label, spec, method in mechanisms(eps, args.sw_buckets):
                    seed += 1  # the same seeds whichever mechanisms run
                    if args.only and label not in args.only:
                        continue
                    cell = one_cell(
                        spec, method, draw, truth_of, true_mean, n, reps, seed,
                        args.boot, args.budget, label,
                    )  # fmt: skip
                    row = dict(mechanism=label, data=data, n=n, eps=eps, **cell)
                    rows.append(row)
                    if args.jsonl:
                        with open(args.jsonl, "a", encoding="utf-8") as fh:
                            fh.write(json.dumps(row) + "\n")
                    lines.append(
                        f"| {label} | {data} | {n:.0e} | {eps:g} | {cell['runs']} | "
                        + " | ".join(fmt(cell, k) for k in FAMILIES)
                        + " |"
                    )
                    print(lines[-1], flush=True)
    lines += ["", *pooled(rows), "", f"{time.perf_counter() - t0:.0f} s wall"]
    print("\n".join(lines[-len(pooled(rows)) - 2 :]), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
