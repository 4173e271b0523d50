"""CPU time of SquareWave.estimate (EMS and EM) and of its bootstrap: box products vs band.

The EM/EMS loop uses prefix sums and a difference array on a Square Wave's band rows (a
constant plateau between a few edge entries, ``ldpkit.numeric.em._box_rows``); this measures
it against the plain band products (the box detection switched off) in the same run, on the
same reports: n reports of Beta(5, 2), 1024 buckets, CPU time (``time.process_time``, not
wall time: the machine is shared). The estimates of both paths are compared too.

Run: ``nice python studies/em_box_speed.py [--n 1000000] [--boot 20] [--eps 0.5 1 2 4]``.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ldpkit.numeric import SquareWave

# the module (``ldpkit.numeric.em`` as an attribute is the em() function)
em_module = importlib.import_module("ldpkit.numeric.em")


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--boot", type=int, default=20)
    parser.add_argument("--buckets", type=int, default=1024)
    parser.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--boot-eps", type=float, nargs="+", default=[1.0])
    args = parser.parse_args()
    box_rows = em_module._box_rows
    paths = {"band": lambda band: None, "box": box_rows}
    print("| method | eps | what | band (s CPU) | box (s CPU) | speed-up | max abs diff |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    values = rng.beta(5, 2, size=args.n)
    for eps in args.eps:
        spec = SquareWave(epsilon=eps, buckets=args.buckets)
        stats = spec.aggregate(spec.randomize(values, rng=rng))
        for method in ("ems", "em"):
            times, outs = {}, {}
            for name, rows in paths.items():
                em_module._box_rows = rows  # type: ignore[assignment]
                spec.estimate(stats, method=method)  # compile, cache the matrix
                est, times[name] = _timed(partial(spec.estimate, stats, method=method))
                outs[name] = est.probabilities
            diff = float(np.abs(outs["box"] - outs["band"]).max())
            print(
                f"| {method} | {eps:g} | estimate | {times['band']:.3f} | {times['box']:.3f} | "
                f"{times['band'] / max(times['box'], 1e-9):.1f}x | {diff:.1e} |",
                flush=True,
            )
            if eps not in args.boot_eps:
                continue
            # the estimate's own tol (EM: 1e-3 e^eps), as Distribution.bootstrap does
            theta, reps, tol = outs["box"], {}, est._fit["tol"]
            for name, rows in paths.items():
                em_module._box_rows = rows  # type: ignore[assignment]
                run = partial(
                    em_module.bootstrap, stats, theta, method=method, tol=tol,
                    replicates=args.boot, rng=1, progress=False,
                )  # fmt: skip
                draws, times[name] = _timed(run)
                reps[name] = draws.replicates
            diff = float(np.abs(reps["box"] - reps["band"]).max())
            print(
                f"| {method} | {eps:g} | bootstrap B = {args.boot} | {times['band']:.1f} | "
                f"{times['box']:.1f} | {times['band'] / max(times['box'], 1e-9):.1f}x | "
                f"{diff:.1e} |",
                flush=True,
            )
    em_module._box_rows = box_rows


if __name__ == "__main__":
    main()
