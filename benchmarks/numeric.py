"""Speed of the numerical mechanisms at n = 1e6: Square Wave + EMS/EM, Haar wavelet, Wiener,
SR, PM, HM, and SW20's competitors (CFO binning, HH, HH-ADMM, HaarHRR); plus a quick accuracy
comparison.

Run: ``python benchmarks/numeric.py [--n 1000000] [--buckets 1024] [--epsilons 0.5 1 2 4]
[--competitor-epsilons 1] [--accuracy-seeds 5]``.
Prints tables and writes benchmarks/results/numeric.json.

The accuracy section (SW20 section 6, Beta(5, 2), n = 1e5, 256 buckets) reports the mean W1
and KS over ``--accuracy-seeds`` seeds (fresh data and randomness per seed) for SW-EMS,
CFO-16/32/64, HH, HH-ADMM and HaarHRR; HH and HaarHRR appear twice, with the monotone CDF
fit (``postprocess="cdf"``) and with Norm-Sub on the leaves (``postprocess="norm_sub"``).

Target (this 2-core machine): SW randomize + aggregate + EMS at n = 1e6 with 1024
buckets in <= 2 s. The end-to-end time below also includes building the exact transition
matrix (cached afterwards per spec). Times are the best of ``--repeat`` runs.

Target: HaarWavelet randomize + aggregate + estimate at n = 1e6 (J = 10) in <= 2 s.
The Wiener rows (binning + GRR/OUE + DW/IIW, 64 bins) are for reference.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Column, print_table, timed
from ldpkit.metrics import ks_distance, wasserstein
from ldpkit.numeric import (
    HHADMM,
    CFOBinning,
    HaarHRR,
    HaarWavelet,
    HierarchicalHistogram,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
    WienerDeconvolution,
    em,
    ems,
)

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_S = 2.0


def _met(meets_target: bool) -> str:
    return "met" if meets_target else "MISSED"


def bench_square_wave(
    eps: float, n: int, buckets: int, values: np.ndarray, repeat: int
) -> dict[str, Any]:
    sw = SquareWave(epsilon=eps, buckets=buckets)
    # the first call for a spec builds its bucket matrix (then cached): timed once, first
    t_mat, _ = timed(sw.bucket_matrix, 1)
    t_rand, reports = timed(lambda: sw.randomize(values, rng=1), repeat)
    t_agg, stats = timed(lambda: sw.aggregate(reports), repeat)
    t_ems, (_, info_s) = timed(lambda: ems(stats, return_info=True), repeat)
    t_em, (_, info_e) = timed(lambda: em(stats, tol=1e-3 * np.exp(eps), return_info=True), repeat)
    total = t_rand + t_agg + t_mat + t_ems
    return {
        "method": "SW",
        "epsilon": eps,
        "n": n,
        "buckets": buckets,
        "randomize_s": t_rand,
        "aggregate_s": t_agg,
        "matrix_s": t_mat,
        "ems_s": t_ems,
        "ems_iterations": info_s.iterations,
        "ems_ms_per_iteration": 1e3 * t_ems / max(info_s.iterations, 1),
        "em_s": t_em,
        "em_iterations": info_e.iterations,
        "end_to_end_s": total,
        "meets_target": total <= TARGET_S,
    }


def bench_mean(cls: type, eps: float, n: int, values: np.ndarray, repeat: int) -> dict[str, Any]:
    spec = cls(epsilon=eps, low=0.0, high=1.0)
    t_rand, reports = timed(lambda: spec.randomize(values, rng=1), repeat)
    t_agg, stats = timed(lambda: spec.aggregate(reports), repeat)
    t_est, est = timed(lambda: spec.estimate(stats), repeat)
    return {
        "method": cls.__name__,
        "epsilon": eps,
        "n": n,
        "randomize_s": t_rand,
        "aggregate_s": t_agg,
        "estimate_s": t_est,
        "end_to_end_s": t_rand + t_agg + t_est,
        "abs_error": abs(est.mean - float(values.mean())),
        "std_error": est.std_error,
    }


#: The post-processing each competitor is run with (Norm-Sub: SW20's; CDF fit: ours).
COMPETITOR_POSTPROCESS = {
    "CFO-16": "norm_sub",
    "CFO-32": "norm_sub",
    "CFO-64": "norm_sub",
    "HH": "cdf",
    "HH-ADMM": "norm_sub",
    "HaarHRR": "cdf",
}


def competitor_specs(eps: float, buckets: int) -> dict[str, Any]:
    """SW20's competitors (section 4) by display name."""
    return {
        "CFO-16": CFOBinning(epsilon=eps, buckets=16),
        "CFO-32": CFOBinning(epsilon=eps, buckets=32),
        "CFO-64": CFOBinning(epsilon=eps, buckets=64),
        "HH": HierarchicalHistogram(epsilon=eps, buckets=buckets),
        "HH-ADMM": HHADMM(epsilon=eps, buckets=buckets),
        "HaarHRR": HaarHRR(epsilon=eps, buckets=buckets),
    }


def bench_competitor(
    name: str, spec: Any, n: int, values: np.ndarray, repeat: int
) -> dict[str, Any]:
    spec.run(values[:1000], rng=0)  # warm-up: compiled kernels load once per process
    t_rand, reports = timed(lambda: spec.randomize(values, rng=1), repeat)
    t_agg, stats = timed(lambda: spec.aggregate(reports), repeat)
    t_est, dist = timed(
        lambda: spec.estimate(stats, postprocess=COMPETITOR_POSTPROCESS[name]), repeat
    )
    return {
        "method": name,
        "epsilon": spec.epsilon,
        "n": n,
        "buckets": spec.buckets,
        "randomize_s": t_rand,
        "aggregate_s": t_agg,
        "estimate_s": t_est,
        "end_to_end_s": t_rand + t_agg + t_est,
        "w1": wasserstein(dist, values),
    }


def accuracy_table(
    epsilons: list[float], seeds: int, n: int = 100_000, buckets: int = 256
) -> list[dict[str, Any]]:
    """Mean W1 and KS over seeds on Beta(5, 2) (SW20 section 6.1: n = 1e5, 256 buckets)."""
    rows = []
    for eps in epsilons:
        methods: dict[str, Any] = {"SW-EMS": (SquareWave(epsilon=eps, buckets=buckets), {})}
        for name, spec in competitor_specs(eps, buckets).items():
            methods[name] = (spec, {"postprocess": COMPETITOR_POSTPROCESS[name]})
            if name in ("HH", "HaarHRR"):
                methods[name + " (Norm-Sub)"] = (spec, {"postprocess": "norm_sub"})
        scores: dict[str, list[tuple[float, float]]] = {m: [] for m in methods}
        for seed in range(seeds):
            values = np.random.default_rng(10_000 + seed).beta(5.0, 2.0, n)
            for name, (spec, kwargs) in methods.items():
                dist = spec.estimate(spec.aggregate(spec.randomize(values, rng=seed)), **kwargs)
                scores[name].append((wasserstein(dist, values), ks_distance(dist, values)))
        for name, sc in scores.items():
            arr = np.array(sc)
            rows.append(
                {
                    "method": name,
                    "epsilon": eps,
                    "n": n,
                    "buckets": buckets,
                    "seeds": seeds,
                    "w1": float(arr[:, 0].mean()),
                    "w1_sd": float(arr[:, 0].std(ddof=1)) if seeds > 1 else 0.0,
                    "ks": float(arr[:, 1].mean()),
                    "ks_sd": float(arr[:, 1].std(ddof=1)) if seeds > 1 else 0.0,
                }
            )
    return rows


def print_competitors(rows: list[dict[str, Any]], accuracy: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    if rows:
        title = f"SW20 competitors at n = {rows[0]['n']:,}, {rows[0]['buckets']} buckets"
        columns: list[Column] = [
            ("method", "method", ""),
            ("epsilon", "eps", "g"),
            ("randomize_s", "randomize s", ".3f"),
            ("aggregate_s", "aggregate s", ".3f"),
            ("estimate_s", "estimate s", ".3f"),
            ("end_to_end_s", "end-to-end s", ".3f"),
            ("w1", "W1", ".4f"),
        ]
        print_table(title, rows, columns)
    if accuracy:
        epsilons = sorted({r["epsilon"] for r in accuracy})
        first = accuracy[0]
        t = Table(
            title=f"Beta(5, 2), n = {first['n']:,}, {first['buckets']} buckets: mean W1 / KS over "
            f"{first['seeds']} seeds (best per eps in bold)"
        )
        t.add_column("method")
        for e in epsilons:
            t.add_column(f"W1 eps={e:g}", justify="right")
            t.add_column(f"KS eps={e:g}", justify="right")
        best = {
            (e, k): min(r[k] for r in accuracy if r["epsilon"] == e)
            for e in epsilons
            for k in ("w1", "ks")
        }
        for name in dict.fromkeys(r["method"] for r in accuracy):
            cells = []
            for e in epsilons:
                r = next(x for x in accuracy if x["method"] == name and x["epsilon"] == e)
                for k in ("w1", "ks"):
                    text = f"{r[k]:.4f}"
                    cells.append(f"[bold]{text}[/bold]" if r[k] == best[(e, k)] else text)
            t.add_row(name, *cells)
        console.print(t)


def bench_wavelet(eps: float, n: int, values: np.ndarray, repeat: int) -> dict[str, Any]:
    hw = HaarWavelet(epsilon=eps, expected_n=n)
    hw.aggregate(hw.randomize(values[:1000], rng=0))  # compile/load the kernels first
    t_rand, reports = timed(lambda: hw.randomize(values, rng=1), repeat)
    t_agg, stats = timed(lambda: hw.aggregate(reports), repeat)
    t_est, _ = timed(lambda: hw.estimate(stats), repeat)
    total = t_rand + t_agg + t_est
    report_bytes = sum(a.nbytes for a in reports.arrays.values())
    return {
        "method": "HaarWavelet",
        "epsilon": eps,
        "n": n,
        "max_level": hw.effective_max_level,
        "top_subset_size": hw.subset_sizes[-1],
        "randomize_s": t_rand,
        "aggregate_s": t_agg,
        "estimate_s": t_est,
        "end_to_end_s": total,
        "report_bytes_per_user": report_bytes / n,
        "meets_target": total <= TARGET_S,
    }


def bench_wiener(
    eps: float, n: int, values: np.ndarray, repeat: int, bins: int = 64
) -> dict[str, Any]:
    wd = WienerDeconvolution(epsilon=eps, buckets=bins)
    t_rand, reports = timed(lambda: wd.randomize(values, rng=1), repeat)
    t_agg, stats = timed(lambda: wd.aggregate(reports), repeat)
    t_dw, _ = timed(lambda: wd.estimate(stats, "direct"), repeat)
    t_iiw, (_, info) = timed(lambda: wd.estimate(stats, "iterative", return_info=True), repeat)
    return {
        "method": "Wiener",
        "epsilon": eps,
        "n": n,
        "bins": bins,
        "oracle": wd.oracle_spec.name,
        "randomize_s": t_rand,
        "aggregate_s": t_agg,
        "dw_s": t_dw,
        "iiw_s": t_iiw,
        "iiw_iterations": info.iterations,
        "end_to_end_s": t_rand + t_agg + t_iiw,
    }


def bench_matvec(buckets: int, repeat: int) -> dict[str, Any]:
    """Reference: the two products of one EM iteration as dense float64 BLAS calls.

    ldpkit's EM does not use them (its compiled band loop is the "ms/iter" column); this
    shows what they cost on this machine at the time of the run (OpenBLAS threads slow down
    badly when the two cores are busy with other work).
    """
    m = np.array(SquareWave(epsilon=1.0, buckets=buckets).bucket_matrix().T)
    mt = np.ascontiguousarray(m.T)
    x = np.full(buckets, 1.0 / buckets)
    loops = 500

    def run() -> None:
        for _ in range(loops):
            y = m @ x
            mt @ y

    t, _ = timed(run, repeat)
    return {"matvec_pair_ms": 1e3 * t / loops, "shape": [buckets, buckets], "dtype": "float64"}


def print_tables(
    sw_rows: list[dict[str, Any]],
    mean_rows: list[dict[str, Any]],
    matvec: dict[str, Any],
    wavelet_rows: list[dict[str, Any]],
    wiener_rows: list[dict[str, Any]],
) -> None:
    from rich.console import Console

    console = Console(width=200)
    sw = sw_rows[0]
    title = f"Square Wave at n = {sw['n']:,}, {sw['buckets']} buckets (target <= {TARGET_S} s)"
    columns: list[Column] = [
        ("epsilon", "eps", "g"),
        ("randomize_s", "randomize s", ".3f"),
        ("aggregate_s", "aggregate s", ".3f"),
        ("matrix_s", "matrix s", ".3f"),
        ("ems_s", "EMS s", ".3f"),
        ("ems_iterations", "EMS iters", ""),
        ("ems_ms_per_iteration", "ms/iter", ".3f"),
        ("em_s", "EM s", ".3f"),
        ("em_iterations", "EM iters", ""),
        ("end_to_end_s", "end-to-end s", ".3f"),
        ("meets_target", "target", _met),
    ]
    print_table(title, sw_rows, columns)
    title = f"Haar wavelet (WAV25) at n = {wavelet_rows[0]['n']:,} (target <= {TARGET_S} s)"
    columns = [
        ("epsilon", "eps", "g"),
        ("max_level", "J", ""),
        ("top_subset_size", "m* at J", ""),
        ("randomize_s", "randomize s", ".3f"),
        ("aggregate_s", "aggregate s", ".3f"),
        ("estimate_s", "estimate s", ".4f"),
        ("end_to_end_s", "end-to-end s", ".3f"),
        ("report_bytes_per_user", "report bytes/user", ".0f"),
        ("meets_target", "target", _met),
    ]
    print_table(title, wavelet_rows, columns)
    title = f"Wiener deconvolution at n = {wiener_rows[0]['n']:,}, {wiener_rows[0]['bins']} bins"
    columns = [
        ("epsilon", "eps", "g"),
        ("oracle", "oracle", ""),
        ("randomize_s", "randomize s", ".3f"),
        ("aggregate_s", "aggregate s", ".3f"),
        ("dw_s", "DW s", ".5f"),
        ("iiw_s", "IIW s", ".5f"),
        ("iiw_iterations", "IIW iters", ""),
        ("end_to_end_s", "end-to-end s", ".3f"),
    ]
    print_table(title, wiener_rows, columns)
    title = f"Mean mechanisms at n = {mean_rows[0]['n']:,} (values in [0, 1])"
    columns = [
        ("method", "method", ""),
        ("epsilon", "eps", "g"),
        ("randomize_s", "randomize s", ".4f"),
        ("aggregate_s", "aggregate s", ".4f"),
        ("estimate_s", "estimate s", ".6f"),
        ("end_to_end_s", "end-to-end s", ".4f"),
        ("abs_error", "|error|", ".2e"),
        ("std_error", "std error", ".2e"),
    ]
    print_table(title, mean_rows, columns)
    console.print(
        f"Reference, dense BLAS M @ theta and M.T @ x on {matvec['shape']} float64: "
        f"{matvec['matvec_pair_ms']:.3f} ms per pair (EMS ms/iter above is the whole "
        "iteration of the band loop)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--buckets", type=int, default=1024)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--competitor-epsilons", type=float, nargs="*", default=[1.0])
    ap.add_argument("--accuracy-seeds", type=int, default=5, help="0 skips the accuracy table")
    ap.add_argument("--accuracy-epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    args = ap.parse_args()

    values = np.random.default_rng(0).beta(5, 2, args.n)
    sw_rows = [
        bench_square_wave(e, args.n, args.buckets, values, args.repeat) for e in args.epsilons
    ]
    mean_rows = [
        bench_mean(cls, e, args.n, values, args.repeat)
        for cls in (StochasticRounding, PiecewiseMechanism, HybridMechanism)
        for e in args.epsilons
    ]
    matvec = bench_matvec(args.buckets, args.repeat)
    wavelet_rows = [bench_wavelet(e, args.n, values, args.repeat) for e in args.epsilons]
    wiener_rows = [bench_wiener(e, args.n, values, args.repeat) for e in args.epsilons]
    print_tables(sw_rows, mean_rows, matvec, wavelet_rows, wiener_rows)
    competitor_rows = [
        bench_competitor(name, spec, args.n, values, args.repeat)
        for e in args.competitor_epsilons
        for name, spec in competitor_specs(e, args.buckets).items()
    ]
    accuracy = (
        accuracy_table(args.accuracy_epsilons, args.accuracy_seeds)
        if args.accuracy_seeds > 0
        else []
    )
    print_competitors(competitor_rows, accuracy)

    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "numeric.json"
    machine = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average": list(os.getloadavg()),
    }
    path.write_text(
        json.dumps(
            {
                "machine": machine,
                "target_s": TARGET_S,
                "square_wave": sw_rows,
                "mean": mean_rows,
                "em_core": matvec,
                "haar_wavelet": wavelet_rows,
                "wiener": wiener_rows,
                "competitors": competitor_rows,
                "accuracy": accuracy,
            },
            indent=2,
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
