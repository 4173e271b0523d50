"""Whole-answer selection by held-out reports: does it help AutoDistribution on the tuning set?

Run: ``nice python studies/auto_whole_select.py --competitor-cache CACHE.json [--reps 5]
[--epsilons 0.5 1 2 4] [--only NAME ...]`` (the cache: ``benchmarks/auto_distribution.py
--heldout --competitor-cache``, same seed and reps; missing cells are computed and added).
Tuning set of the held-out protocol only (``heldout_data("tuning", ...)``): nothing here looks
at the test set.

Per cell and run (the benchmark's seeds: the same reports as its Auto column), the reports
are split in two folds by binomial thinning (every SW output count, HH support count and
branch size; fixed seed). On the training fold the candidates are built:

- ``auto``: AutoDistribution's whole estimate of the training fold's statistics;
- ``hh``: the HH reports alone, plain EM of their support counts (the joint model with
  the Square Wave rows set to 0), to the stop of plain EM;
- ``half``: the average of the two;
- ``loose``: ``auto`` with interior atoms placed at looser thresholds (2 -> 1.5 times the
  local median, 8 -> 4 / d above it);
- ``atomfit``: a smoothed refit (strength 0.5) of ``auto`` in which the buckets of its peaks
  (the looser thresholds) are atoms the smoothing leaves alone, then the atoms placed as
  the estimator places them: the joint EM with explicit atom weights at the flagged nodes.

Each is scored by the held-out fold's log-likelihood (Square Wave reports through the SW
transition matrix, HH support counts through the level oracles' support probabilities:
the estimator's own joint model), as ``z`` = gain over ``auto`` / its standard error; and
by the held-out HH counts alone (``hh:``). A rule "candidate c when z > Z" replaces the
estimate on all reports by the candidate built on all reports. Printed: cells of the 144
within 10 % of the best competitor, the worst ratio, and the cells a rule moves by 0.03.

Measured (n = 1e5, 5 runs per cell, seed 0, 144 cells; the estimator alone, rule ``auto``:
129 within 10 %, worst 1.44, as benchmarks/auto_distribution.py --heldout reports). No rule
gains a cell: ``hh`` scores below ``auto`` in all but a few of the 360 runs (z per cell
mostly -3 to -12; switched 1 run at z > 0, none at 1.5); ``half`` 128 (z > 0; 8 runs switched,
mixtures at eps 1-2 lose 0.05-0.12 in W1); ``loose`` 129 at every threshold but worst 1.49 at
z > 0 (80 runs switched; mixture 9 eps 1 KS 1.44 -> 1.49); ``atomfit`` 127 / 128 / 129 at
z > 0 / 1.5 / 3 (mixture 7 eps 4 KS 1.14 -> 1.18-1.21, mixture 0 eps 4 KS 1.08 -> 1.13;
mixture 9 eps 4 KS 1.00 -> 0.94); scored by the HH counts alone: ``hh`` 127 (worst 1.55),
``half`` 123 / 128 / 129, ``loose`` 129 (worst 1.49 at z > 0), ``atomfit`` 127 / 128 / 128.
The held-out likelihood measures the density, not the CDF: where a candidate wins on it,
the W1 improves a little and the KS at the heaps' edges does not. None is in the estimator.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from _common import load_script
from ldpkit.experiments.numeric import grid_errors
from ldpkit.numeric import AutoDistribution, Distribution
from ldpkit.numeric import auto as A
from ldpkit.spec import Stats

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(_BENCH))  # the benchmark's own helpers import as top-level modules
bench = load_script(_BENCH / "auto_distribution.py", "_auto_bench")

CANDIDATES = ("hh", "half", "loose", "atomfit")
LOOSE = (1.5, 4.0)  # the looser peak thresholds: ratio to the local median, excess * d
THRESHOLDS = (0.0, 1.5, 3.0)


def thin(auto: AutoDistribution, stats: Stats, gen: np.random.Generator) -> tuple[Stats, Stats]:
    """Split the statistics in two folds by binomial thinning (p = 1/2 per count)."""
    c = gen.binomial(np.asarray(stats.counts), 0.5)
    h = gen.binomial(np.asarray(stats.hh_counts), 0.5)
    ln = gen.binomial(np.asarray(stats.level_n), 0.5)
    ln[0] = c.sum()
    lt = np.asarray(stats.level_n) - ln
    lt[0] = int(np.asarray(stats.counts).sum() - c.sum())
    train = Stats(auto, int(ln.sum()), counts=c, hh_counts=h, level_n=ln)
    rest = Stats(
        auto,
        int(lt.sum()),
        counts=np.asarray(stats.counts) - c,
        hh_counts=np.asarray(stats.hh_counts) - h,
        level_n=lt,
    )
    return train, rest


def with_loose(fn: Any, *args: Any) -> Any:
    """Call ``fn`` with the estimator's interior-atom thresholds at :data:`LOOSE`."""
    old = A._LEAF_ATOM_RATIO, A._LEAF_ATOM_EXCESS
    A._LEAF_ATOM_RATIO, A._LEAF_ATOM_EXCESS = LOOSE
    try:
        return fn(*args)
    finally:
        A._LEAF_ATOM_RATIO, A._LEAF_ATOM_EXCESS = old


def candidates(auto: AutoDistribution, stats: Stats, share: float) -> dict[str, np.ndarray]:
    """Every candidate answer built from ``stats`` (``share``: its part of all reports)."""
    model = A._hybrid_model(auto)
    rows = model.matrix.shape[0]
    counts, wts, make = auto._model(stats)
    wcounts = counts * wts
    hh_counts = np.asarray(stats.hh_counts, dtype=np.float64)
    base = np.asarray(auto.estimate(stats).probabilities, dtype=np.float64)
    hh_only = wcounts.copy()
    hh_only[:rows] = 0.0
    tol = 1e-3 * math.exp(auto.epsilon) * share  # plain EM's stop, as the estimator's
    hh, _ = make(hh_only).fit(0.0, tol, 10_000, None)
    loose, _ = with_loose(A._place_atoms, base, model, hh_counts)
    atomfit = base
    found = A._peak_runs(base, *LOOSE)
    if found is not None:
        mask = np.zeros(base.size, dtype=np.bool_)
        edges = found[1]
        for lo, hi in zip(edges[::2], edges[1::2], strict=True):
            mask[lo:hi] = True
        atomfit, _ = make(wcounts).fit(0.5, 1e-3 * share, 10_000, base, mask)
        atomfit, _ = A._place_atoms(atomfit, model, hh_counts)
    return {"auto": base, "hh": hh, "half": 0.5 * (base + hh), "loose": loose, "atomfit": atomfit}


def zscores(auto: AutoDistribution, fold: dict[str, np.ndarray], held: Stats) -> dict[str, float]:
    """Held-out z of every candidate against ``auto``: all reports, and HH counts alone."""
    counts, wts, make = auto._model(held)
    part = counts * wts
    rows = A._hybrid_model(auto).matrix.shape[0]
    hh_part = part.copy()
    hh_part[:rows] = 0.0
    fitter = make(part)  # predict depends on the model only
    la = np.log(np.maximum(fitter.predict(fold["auto"]), A._TINY))
    out = {}
    for c in CANDIDATES:
        lc = np.log(np.maximum(fitter.predict(fold[c]), A._TINY))
        for tag, p in (("", part), ("hh:", hh_part)):
            se = A._se(p, lc, la)
            gain = float(p @ (lc - la))
            out[tag + c] = gain / se if se > 0 else 0.0
    return out


def main() -> None:
    """Run the tuning set and print every rule's count of cells within 10 % of the best."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--competitor-cache", required=True)
    ap.add_argument("--reps", type=int, default=bench.HELDOUT_REPS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1, 2, 4])
    ap.add_argument("--only", nargs="+", default=None)
    args = ap.parse_args()
    cache_path = Path(args.competitor_cache)
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    rules = ["auto"] + [
        f"{tag}{c}>{z:g}" for tag in ("", "hh:") for c in CANDIDATES for z in THRESHOLDS
    ]
    # per rule, per cell: (W1, KS) of every run
    errs: dict[str, dict[tuple[str, float], list[tuple[float, float]]]] = {r: {} for r in rules}
    comp: dict[tuple[str, float], dict[str, list[tuple[float, float]]]] = {}
    picks = dict.fromkeys(rules, 0)
    for name, values in bench.heldout_data("tuning", args.n, args.seed).items():
        if args.only and name not in args.only:
            continue
        srt = np.sort(values)
        for eps in args.epsilons:
            tag = f"tuning:{name}"
            key0 = f"{tag}|{values.size}|{eps:g}|{args.seed}|0"
            if key0 not in cache:  # the competitors' errors, as the benchmark computes them
                bench.run_cell(
                    values, 1024, eps, args.reps, args.seed, None, None, cache, tag, 1024
                )
                cache_path.write_text(json.dumps(cache))
            cell = (name, eps)
            comp[cell] = {m: [] for m in bench.COMPETITORS}
            for r in range(args.reps):
                key = f"{tag}|{values.size}|{eps:g}|{args.seed}|{r}"
                for m in bench.COMPETITORS:
                    comp[cell][m].append(tuple(cache[key][m]))
                seed_r = np.random.SeedSequence([args.seed, r, int(eps * 100)])
                auto = AutoDistribution(epsilon=eps, expected_n=values.size)
                stats = auto.aggregate(auto.randomize(values, rng=seed_r))
                train, held = thin(auto, stats, np.random.default_rng([args.seed, r, 33]))
                z = zscores(auto, candidates(auto, train, 0.5), held)
                full = candidates(auto, stats, 1.0)
                e = {
                    c: grid_errors(Distribution(t, auto.low, auto.high), srt, 1024)
                    for c, t in full.items()
                }
                for rule in rules:
                    pick = "auto"
                    if rule != "auto":
                        lhs, thr = rule.split(">")
                        if z[lhs] > float(thr):
                            pick = lhs.removeprefix("hh:")
                            picks[rule] += 1
                    errs[rule].setdefault(cell, []).append(e[pick])
            print(
                f"{name:22s} eps={eps:<4g} z {json.dumps({k: round(v, 1) for k, v in z.items()})}"
            )
    base = errs["auto"]
    for rule in rules:
        within, worst, moved = 0, 0.0, []
        for cell, runs in errs[rule].items():
            arr = np.asarray(runs).mean(axis=0)
            best = np.asarray([np.asarray(v).mean(axis=0) for v in comp[cell].values()]).min(0)
            ratio = arr / best
            base_ratio = np.asarray(base[cell]).mean(axis=0) / best
            within += int((ratio <= 1.1).sum())
            worst = max(worst, float(ratio.max()))
            for m, (x, y) in enumerate(zip(base_ratio, ratio, strict=True)):
                if abs(x - y) >= 0.03:
                    moved.append(f"{cell[0]} eps {cell[1]:g} {('W1', 'KS')[m]} {x:.2f}->{y:.2f}")
        cells = 2 * len(errs[rule])
        print(
            f"{rule:16s} within 10 %: {within} of {cells}; worst {worst:.2f}; "
            f"switched runs {picks[rule]}; moved: {'; '.join(moved) or '-'}"
        )


if __name__ == "__main__":
    main()
