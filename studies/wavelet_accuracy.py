"""Accuracy check: Haar wavelet (WAV25) vs Square Wave + EMS/EM, HH and Wiener IIW on smooth and spiky data.

Run: ``python studies/wavelet_accuracy.py [--ns 100000 1000000] [--epsilons 0.5 1 2 4] [--reps 10]``.
Prints a table and writes benchmarks/results/wavelet_accuracy.json.

Data: Beta(5, 2) (smooth, WAV25's synthetic set) and a heaped distribution standing in for
WAV25's income/retirement data until real heaped salaries are loaded: X ~ Beta(2, 5) read
as a salary on [0, 150k], then 35% of the values rounded to the nearest 5k (multiples of
1/30) and 35% to the nearest 1k (multiples of 1/150), the rest left as drawn; and a
strongly spiky one: X ~ Beta(2, 5) with half of the values rounded to the nearest 0.1
(11 point masses holding half of the mass).

Metrics as WAV25 section 6.1 computes them (``ldpkit.experiments.numeric.grid_errors``, the
same code ``ldpkit reproduce wav25`` uses): the true empirical CDF and the estimated CDF at
the M = 256 grid points i/256 (i = 1..256); W1 = mean |difference|, KS = max |difference|.
One convention fixed: the truth at grid point x < 1 counts the values *below* x, because
every estimate here is a histogram whose bucket [x, x + w) holds a value equal to x; with
"<= x" a point mass sitting exactly on a grid point (here 0.5) would count its whole mass
as KS error for every method alike. Averages over ``--reps`` runs (WAV25 used 100). The
full comparison on real data, with every competitor, is ``ldpkit reproduce wav25``.

Methods: HaarWavelet with J = ceil(log2(n)/2) (WAV25's rule) and with J - 2 (a J sweep
showed the rule's J too fine at these n); SquareWave + EMS with 256
buckets on Beta(5, 2) and 1024 on the heaped data (SW20's settings for synthetic and real
data); Square Wave + plain EM with the same buckets; the hierarchical histogram HH (B = 4,
same buckets, monotone-CDF fit); Wiener IIW on 64 bins (WAV25 runs its binning competitors
at 8..64 bins). This complements ``ldpkit reproduce wav25`` (real data, n <= 330k) with
synthetic data at n = 1e6.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit.experiments.numeric import grid_errors
from ldpkit.numeric import HaarWavelet, HierarchicalHistogram, SquareWave, WienerDeconvolution

RESULTS = Path(__file__).resolve().parent / "results"


def heaped(n: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.beta(2.0, 5.0, n)
    r = rng.random(n)
    x = np.where(r < 0.35, np.round(x * 30) / 30, np.where(r < 0.7, np.round(x * 150) / 150, x))
    return np.clip(x, 0.0, 1.0)


def spikes(n: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.beta(2.0, 5.0, n)
    return np.where(rng.random(n) < 0.5, np.round(x * 10) / 10, x)


DATA = {
    "beta52": lambda n, rng: rng.beta(5.0, 2.0, n),
    "heaped": heaped,
    "spikes": spikes,
}
METHODS = ("HaarWavelet", "HaarWavelet-J2", "SW-EMS", "SW-EM", "HH", "Wiener-IIW")


def run_cell(data: str, n: int, eps: float, reps: int) -> list[dict[str, Any]]:
    rows = []
    for r in range(reps):
        rng = np.random.default_rng([n, r, 17])
        values = DATA[data](n, rng)
        srt = np.sort(values)
        top = HaarWavelet(epsilon=eps, expected_n=n).effective_max_level
        buckets = 256 if data == "beta52" else 1024
        methods: dict[str, tuple[Any, dict[str, Any]]] = {
            "HaarWavelet": (HaarWavelet(epsilon=eps, expected_n=n), {}),
            "HaarWavelet-J2": (HaarWavelet(epsilon=eps, max_level=max(0, top - 2)), {}),
            "SW-EMS": (SquareWave(epsilon=eps, buckets=buckets), {"method": "ems"}),
            "SW-EM": (SquareWave(epsilon=eps, buckets=buckets), {"method": "em"}),
            "HH": (HierarchicalHistogram(epsilon=eps, buckets=buckets), {}),
            "Wiener-IIW": (WienerDeconvolution(epsilon=eps, buckets=64), {}),
        }
        for name, (spec, kwargs) in methods.items():
            t0 = time.perf_counter()
            dist = spec.estimate(spec.aggregate(spec.randomize(values, rng=1000 + r)), **kwargs)
            w1, ks = grid_errors(dist, srt)
            rows.append(
                {
                    "data": data,
                    "n": n,
                    "epsilon": eps,
                    "rep": r,
                    "method": name,
                    "w1": w1,
                    "ks": ks,
                    "seconds": time.perf_counter() - t0,
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()

    rows: list[dict[str, Any]] = []
    for data in DATA:
        for n in args.ns:
            for eps in args.epsilons:
                rows += run_cell(data, n, eps, args.reps)

    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"W1 and KS on a 256-point grid, mean of {args.reps} runs: the best method's error "
        "(x 1000) and each method's error / the best's"
    )
    for col in (
        "data",
        "n",
        "eps",
        "best W1",
        *(f"{m} W1" for m in METHODS),
        "best KS",
        *(f"{m} KS" for m in METHODS),
    ):
        table.add_column(col, justify="right")
    summary = []
    for data in DATA:
        for n in args.ns:
            for eps in args.epsilons:
                cell = [
                    r for r in rows if r["data"] == data and r["n"] == n and r["epsilon"] == eps
                ]

                def mean(method: str, key: str, cell: list[dict[str, Any]] = cell) -> float:
                    return float(np.mean([r[key] for r in cell if r["method"] == method]))

                s = {"data": data, "n": n, "epsilon": eps}
                for m in METHODS:
                    s[f"{m}_w1"], s[f"{m}_ks"] = mean(m, "w1"), mean(m, "ks")
                summary.append(s)
                best = {k: min(s[f"{m}_{k}"] for m in METHODS) for k in ("w1", "ks")}
                table.add_row(
                    data,
                    f"{n:,}",
                    f"{eps:g}",
                    f"{1000 * best['w1']:.2f}",
                    *(f"{s[f'{m}_w1'] / best['w1']:.2f}" for m in METHODS),
                    f"{1000 * best['ks']:.1f}",
                    *(f"{s[f'{m}_ks'] / best['ks']:.2f}" for m in METHODS),
                )
    Console(width=240).print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "wavelet_accuracy.json"
    path.write_text(json.dumps({"reps": args.reps, "summary": summary, "runs": rows}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
