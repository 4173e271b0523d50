"""Which smoothing strength would the CDF have wanted? The Square-Wave-only cells.

Run: ``nice python studies/auto_select_probe.py --competitor-cache CACHE.json --seed 0
[--reps 20] [--epsilons 0.5 1] [--datasets ...]`` (the cache: ``auto_distribution.py
--competitor-cache``, same seed and reps). Per cell (eps < 1.5: AutoDistribution sends Square
Wave reports only), prints the ratio to the best competitor (W1/KS, means over the runs) of

- ``auto``: AutoDistribution's default estimate;
- ``s=...``: every fixed candidate strength alone (``strengths=(s,)``, no budgets, no end
  atoms): the oracle per metric among the candidates;
- ``ll`` / ``rks`` / ``rcvm``: the single strength picked on AutoDistribution's held-out fold
  (``rng=0``, 2 folds) by the held-out log-likelihood, or by the smallest Kolmogorov-Smirnov /
  Cramer-von Mises distance between the fit's predicted REPORT CDF (``M theta`` cumulated)
  and the held-out reports' empirical CDF (a criterion computable from reports alone).

The picks are scored with the fixed strength's fit on all reports. Results: METHODS.md,
AutoDistribution, "Selection aimed at the CDF".
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from ldpkit._rng import as_generator
from ldpkit.experiments.numeric import grid_errors
from ldpkit.numeric import AutoDistribution
from ldpkit.numeric.auto import _TINY, _split
from ldpkit.reproduce import wav25

STRENGTHS = (8.0, 2.0, 0.5, 0.0)  # the path order of the fold fits: strongest first


def held_out_criteria(auto: AutoDistribution, stats: object) -> dict[float, dict[str, float]]:
    """Per strength: held-out log-likelihood and report-CDF distances (one fold, rng 0)."""
    counts, _, make = auto._model(stats)  # SW alone (eps < 1.5): weights 1
    part = _split(counts, 2, as_generator(0))[0].astype(float)
    train = counts - part
    fitter = make(train)
    share = float(train.sum()) / float(counts.sum())
    q = np.cumsum(part / part.sum())
    theta = None
    out = {}
    for s in STRENGTHS:
        tol = (1e-3 * math.exp(auto.epsilon) if s == 0 else 1e-3) * share
        fit, _ = fitter.fit(s, tol, 1000, theta)
        if s > 0:
            theta = fit
        pred = fitter.predict(fit)
        gap = np.cumsum(pred / pred.sum()) - q
        out[s] = {
            "ll": float(part @ np.log(np.maximum(pred, _TINY))),
            "rks": -float(np.abs(gap).max()),
            "rcvm": -float(gap @ gap),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--competitor-cache", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--datasets", nargs="+", default=list(wav25.DATASETS))
    args = ap.parse_args()
    cache = json.loads(open(args.competitor_cache).read())
    for name in args.datasets:
        bench = wav25.load_bench(name, wav25.FULL, args.seed)
        values, n = bench.values, bench.n
        srt = np.sort(values)
        for eps in args.epsilons:
            err: dict[str, list[tuple[float, float]]] = {}
            comp: dict[str, list[tuple[float, float]]] = {}
            for r in range(args.reps):
                seed_r = np.random.SeedSequence([args.seed, r, int(eps * 100)])
                auto = AutoDistribution(epsilon=eps, expected_n=n)
                st = auto.aggregate(auto.randomize(values, rng=seed_r))
                err.setdefault("auto", []).append(grid_errors(auto.estimate(st), srt))
                fixed = {}
                for s in STRENGTHS:
                    dist = auto.estimate(st, strengths=(s,), budgets=(), end_atoms=False)
                    fixed[s] = grid_errors(dist, srt)
                    err.setdefault(f"s={s:g}", []).append(fixed[s])
                crit = held_out_criteria(auto, st)
                for c in ("ll", "rks", "rcvm"):
                    pick = max(STRENGTHS, key=lambda s, c=c: crit[s][c])
                    err.setdefault(c, []).append(fixed[pick])
                for m, e in cache[f"{name}|{n}|{eps:g}|{args.seed}|{r}"].items():
                    comp.setdefault(m, []).append(tuple(e))
            best = np.min([np.mean(v, axis=0) for v in comp.values()], axis=0)
            cells = " ".join(
                f"{k} {a:.2f}/{b:.2f}"
                for k, (a, b) in ((k, np.mean(v, 0) / best) for k, v in err.items())
            )
            print(f"{name[:10]:10s} eps={eps:<4g} {cells}", flush=True)


if __name__ == "__main__":
    main()
