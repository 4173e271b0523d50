"""Throughput of RAPPOR: client, server aggregation and the regression decoder.

Run from the repository root::

    PYTHONPATH=src python benchmarks/rappor.py [--n 1000000] [--domains 1024]
        [--epsilon 1] [--repeat 3]

For each candidate-list size d (default configuration: 128 bits, 2 hashes, 8 cohorts) it
times, best of ``--repeat`` runs: the one-time design set-up (hashing every candidate in
every cohort, sparse design, exact privacy table), ``randomize`` without and with IRR
(users/s), ``aggregate`` (reports/s) next to the cohort-sorted ``column_counts``
alternative, and ``estimate`` with LASSO selection and, when the design has full column
rank, the unbiased least-squares path. It also reports how the LASSO decoder did on the
Zipf(1.1) input (candidates selected, how many of the true top 30 it found, mean squared
error on those 30). Prints a table and writes benchmarks/results/rappor.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit import RAPPOR, SUE, Reports

RESULTS = Path(__file__).resolve().parent / "results"


def best_time(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Best wall time of ``repeat`` calls, the CPU time of that call, and its result."""
    best, best_cpu, out = float("inf"), 0.0, None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall < best:
            best, best_cpu = wall, cpu
    return best, best_cpu, out


def sorted_column_counts(spec: RAPPOR, reports: Reports) -> np.ndarray:
    """The alternative aggregation: sort rows by cohort, then column counts per cohort.

    The column counts of packed bits are a unary encoding's support counts (the same
    compiled pass), read through the public :meth:`ldpkit.SUE.support_counts`.
    """
    counter = SUE(epsilon=1.0, domain_size=spec.num_bits)
    order = np.argsort(reports.cohorts, kind="stable")
    bits = reports.bits[order]
    bounds = np.searchsorted(reports.cohorts[order], np.arange(spec.num_cohorts + 1))
    return np.stack(
        [
            counter.support_counts(Reports(counter, bits=bits[bounds[c] : bounds[c + 1]]))
            for c in range(spec.num_cohorts)
        ]
    )


def bench(d: int, n: int, epsilon: float, repeat: int) -> dict[str, Any]:
    spec = RAPPOR(epsilon=epsilon, domain_size=d)
    irr = spec.replace(instantaneous=(0.5, 0.75))
    w = 1.0 / np.arange(1, d + 1) ** 1.1
    values = np.random.default_rng(0).choice(d, size=n, p=w / w.sum())
    truth = np.bincount(values, minlength=d) / n

    # the first call for these parameters builds and caches the design (each d runs once)
    t_design, _, _ = best_time(lambda: spec.privacy_loss(), 1)
    t_rand, c_rand, reports = best_time(lambda: spec.randomize(values, rng=1), repeat)
    t_irr, _, _ = best_time(lambda: irr.randomize(values, rng=1), repeat)
    t_agg, c_agg, stats = best_time(lambda: spec.aggregate(reports), repeat)
    t_sort, _, counts = best_time(lambda: sorted_column_counts(spec, reports), repeat)
    assert np.array_equal(counts, stats.bit_counts), "aggregation methods disagree"
    t_lasso, c_lasso, est = best_time(
        lambda: spec.estimate(stats, postprocess="lasso_selection"), repeat
    )
    try:
        t_ls, _, _ = best_time(lambda: spec.estimate(stats), 1)
    except ValueError:
        t_ls = None  # more candidates than the design's rank
    top = np.argsort(-truth)[:30]
    selected = np.flatnonzero(est.frequencies != 0)
    return {
        "d": d,
        "n": n,
        "epsilon": epsilon,
        "design_s": t_design,
        "randomize_s": t_rand,
        "randomize_cpu_s": c_rand,
        "randomize_users_per_s": n / t_rand,
        "randomize_irr_users_per_s": n / t_irr,
        "aggregate_s": t_agg,
        "aggregate_cpu_s": c_agg,
        "aggregate_reports_per_s": n / t_agg,
        "sorted_column_counts_reports_per_s": n / t_sort,
        "estimate_lasso_s": t_lasso,
        "estimate_lasso_cpu_s": c_lasso,
        "estimate_least_squares_s": t_ls,
        "end_to_end_s": t_rand + t_agg + t_lasso,
        "selected": int(selected.size),
        "top30_found": int(np.isin(top, selected).sum()),
        "top30_mse": float(np.mean((est.frequencies[top] - truth[top]) ** 2)),
        "privacy_loss": spec.privacy_loss(),
    }


COLUMNS = [
    ("d", "d"),
    ("design_s", "design s"),
    ("randomize_users_per_s", "randomize users/s"),
    ("randomize_irr_users_per_s", "+IRR users/s"),
    ("aggregate_reports_per_s", "aggregate reports/s"),
    ("sorted_column_counts_reports_per_s", "sorted column_counts reports/s"),
    ("estimate_lasso_s", "estimate LASSO s"),
    ("estimate_least_squares_s", "estimate LS s"),
    ("end_to_end_s", "end to end s"),
    ("selected", "selected"),
    ("top30_found", "top-30 found"),
    ("top30_mse", "top-30 MSE"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--domains", type=int, nargs="+", default=[1024])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = [bench(d, args.n, args.epsilon, args.repeat) for d in args.domains]
    header = " | ".join(h for _, h in COLUMNS)
    print(f"RAPPOR (128 bits, 2 hashes, 8 cohorts), n = {args.n:,}, epsilon = {args.epsilon}")
    print(header)
    for row in rows:
        cells = []
        for key, _ in COLUMNS:
            v = row[key]
            cells.append("-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v))
        print(" | ".join(cells))
    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    path = RESULTS / "rappor.json"
    path.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
