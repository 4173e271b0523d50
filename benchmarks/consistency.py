"""Speed of every consistency method (CON20) at d = 1e5, and a quick accuracy check.

Run: ``python benchmarks/consistency.py [--domain 100000] [--repeat 5] [--accuracy]``.
Prints a table and writes benchmarks/results/consistency.json.

Target: every method well under a second at d = 1e5. Two kinds of input:
``grr``, a real GRR estimate (few distinct values: counts are small integers), and
``gauss``, unbiased frequencies plus Gaussian noise at the oracle's variance (every value
distinct, as from OUE/OLH), which is the hard case for Power's posterior-mean evaluation.

``--accuracy`` also prints the CON20-style comparison (MSE per method and query) for GRR
on a Zipf(1.5) data set with n = 1e5, d = 128, epsilon = 1, averaged over 30 trials.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit import GRR, FrequencyEstimate
from ldpkit.consistency import METHODS, compare

RESULTS = Path(__file__).resolve().parent / "results"


def best_time(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def zipf(d: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, d + 1) ** s
    return w / w.sum()


def inputs(d: int, rng: np.random.Generator) -> dict[str, FrequencyEstimate]:
    truth = zipf(d, 1.1)
    out = {}
    n = 10**6
    grr = GRR(epsilon=4.0, domain_size=d)
    values = rng.choice(d, size=n, p=truth)
    out["grr n=1e6 eps=4"] = grr.estimate(grr.aggregate(grr.randomize(values, rng=rng)))
    for n, eps in ((10**6, 4.0), (10**8, 6.0)):
        spec = GRR(epsilon=eps, domain_size=d)
        var = spec.variance(n)
        f = truth + rng.normal(0.0, np.sqrt(var), d)
        f += (1.0 - f.sum()) / d  # GRR estimates sum to 1
        out[f"gauss n=1e{int(np.log10(n))} eps={eps:g}"] = FrequencyEstimate(f, var, n=n, spec=spec)
    return out


def speed(d: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    for label, est in inputs(d, np.random.default_rng(0)).items():
        distinct = int(np.unique(est.frequencies).size)
        for name, fn in METHODS.items():
            fn(est)  # warm up
            t = best_time(lambda fn=fn, est=est: fn(est), repeat)
            rows.append(
                {"input": label, "distinct": distinct, "method": name, "d": d, "seconds": t}
            )
    return rows


def accuracy(trials: int = 30) -> dict[str, dict[str, float]]:
    d, n = 128, 10**5
    truth = zipf(d, 1.5)
    counts = np.floor(truth * n).astype(int)
    counts[0] += n - counts.sum()
    values = np.repeat(np.arange(d), counts)
    grr = GRR(epsilon=1.0, domain_size=d)
    rng = np.random.default_rng(0)
    ests = [grr.estimate(grr.aggregate(grr.randomize(values, rng=rng))) for _ in range(trials)]
    queries = {
        "full": {"query": "full"},
        "set_10": {"query": "set", "rho": 0.1},
        "set_50": {"query": "set", "rho": 0.5},
        "set_90": {"query": "set", "rho": 0.9},
        "top_10": {"query": "topk", "k": 10},
        "top_32": {"query": "topk", "k": 32},
    }
    return compare(ests, counts / n, queries=queries, rng=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--domain", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--accuracy", action="store_true")
    args = ap.parse_args()

    rows = speed(args.domain, args.repeat)
    labels = list(dict.fromkeys(r["input"] for r in rows))
    print(f"consistency methods, d = {args.domain}, best of {args.repeat} (ms)")
    print(f"{'method':10s}" + "".join(f"{lab:>24s}" for lab in labels))
    for name in METHODS:
        cells = [
            next(r for r in rows if r["input"] == lab and r["method"] == name) for lab in labels
        ]
        print(f"{name:10s}" + "".join(f"{c['seconds'] * 1e3:24.2f}" for c in cells))
    print(
        "distinct values:",
        {lab: next(r["distinct"] for r in rows if r["input"] == lab) for lab in labels},
    )
    result: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cpus": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
        "rows": rows,
    }
    if args.accuracy:
        acc = accuracy()
        qs = list(next(iter(acc.values())))
        print("\nMSE, GRR on Zipf(1.5), n = 1e5, d = 128, eps = 1, 30 trials")
        print(f"{'method':10s}" + "".join(f"{q:>11s}" for q in qs))
        for m, r in acc.items():
            print(f"{m:10s}" + "".join(f"{r[q]:11.3e}" for q in qs))
        print("best:", {q: min(acc, key=lambda m, q=q: acc[m][q]) for q in qs})
        result["accuracy"] = acc
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "consistency.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
