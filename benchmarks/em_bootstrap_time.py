"""CPU time of the EM/EMS bootstrap intervals (``Distribution.bootstrap``) against one estimate.

Square Wave with 1024 buckets, n reports of Beta(5, 2), epsilon in {1, 2}: the CPU time
(``time.process_time``, not wall time: the machine is shared) of one estimate and of a
bootstrap with B replicates (2 B + 1 runs of the estimator), and their ratio.

Run: ``nice python benchmarks/em_bootstrap_time.py [--n 1000000] [--boot 200]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from ldpkit.numeric import SquareWave


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--boot", type=int, default=200)
    parser.add_argument("--buckets", type=int, default=1024)
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0])
    args = parser.parse_args()
    print("| method | eps | estimate (s CPU) | bootstrap B (s CPU) | ratio |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    values = rng.beta(5, 2, size=args.n)
    for eps in args.eps:
        spec = SquareWave(epsilon=eps, buckets=args.buckets)
        stats = spec.aggregate(spec.randomize(values, rng=rng))
        for method in ("ems", "em"):
            spec.estimate(stats, method=method)  # compile and cache the matrix first
            t0 = time.process_time()
            est = spec.estimate(stats, method=method)
            t1 = time.process_time()
            boot = est.bootstrap(args.boot, rng=1)
            with warnings.catch_warnings():  # EMS: "approximate" (docs/intervals.md)
                warnings.simplefilter("ignore")
                boot.mean_interval()
            t2 = time.process_time()
            print(
                f"| {method} | {eps:g} | {t1 - t0:.2f} | {t2 - t1:.1f} (B = {args.boot}) | "
                f"{(t2 - t1) / max(t1 - t0, 1e-9):.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
