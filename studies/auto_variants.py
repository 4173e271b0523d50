"""Which server-side variant of AutoDistribution.estimate gains cells on the tuning set.

Run: ``nice python studies/auto_variants.py --cache FILE.json [--epsilons 0.5 1]
[--variants base sharpen1 ...] [--only "mixture 9" ...]``, from the repository root, after
``benchmarks/auto_distribution.py --heldout --set tuning --competitor-cache FILE.json`` has
filled the competitors' per-run errors. The held-out protocol's tuning set only (the test set
is never read here): the same data, seeds and reports as the benchmark (n = 1e5, 5 runs per
cell), every variant estimated from the same Stats, scored on the 1024-point CDF grid against
the best competitor's mean error. Prints, per variant, the cells within 10 % of the best and
the worst ratio, and the "oracle" of the variants (the best variant per cell: what any choice
among them could reach at most).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import auto_distribution as bench
from ldpkit.experiments.numeric import grid_errors
from ldpkit.numeric import AutoDistribution
from ldpkit.numeric import auto as A


@contextlib.contextmanager
def patched(**values: Any) -> Iterator[None]:
    """Set module constants of ``ldpkit.numeric.auto`` for the duration."""
    old = {k: getattr(A, k) for k in values}
    for k, v in values.items():
        setattr(A, k, v)
    A._hybrid_model.cache_clear()
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(A, k, v)
        A._hybrid_model.cache_clear()


@contextlib.contextmanager
def hh_weight(factor: float) -> Iterator[None]:
    """Scale the HH rows' likelihood weights by ``factor``."""
    original = A._hybrid_model

    @functools.lru_cache(maxsize=8)
    def scaled(spec: AutoDistribution) -> Any:
        m = original(spec)
        rows = m.matrix.shape[0]
        w = m.weights.copy()
        w[rows:] *= factor
        w.flags.writeable = False
        return dataclasses.replace(m, weights=w)

    A._hybrid_model = scaled  # type: ignore[assignment]
    try:
        yield
    finally:
        A._hybrid_model = original  # type: ignore[assignment]


def variants() -> dict[str, tuple[Callable[[], Any], dict[str, Any], float | None]]:
    """name -> (context, estimate keyword arguments, hh_share of the spec or None)."""
    null = contextlib.nullcontext
    return {
        "base": (null, {}, None),
        "nosharpen": (null, {"sharpen": False}, None),
        "sharpen3": (lambda: patched(_SHARPEN=3.0), {}, None),
        "noatoms": (null, {"interior_atoms": False}, None),
        "best": (null, {"combine": "best"}, None),
        "s32": (null, {"strengths": (0.0, 0.5, 2.0, 8.0, 32.0)}, None),
        "nobudget": (null, {"budgets": ()}, None),
        "hhw0.5": (lambda: hh_weight(0.5), {}, None),
        "hhw2": (lambda: hh_weight(2.0), {}, None),
        "cv": (null, {"cross_validate": True}, None),
        "r0": (null, {}, 0.0),
        "r0.15": (null, {}, 0.15),
        "nowindow": (lambda: patched(_END_WINDOW_MAX_EPS=0.0), {}, None),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1, 2, 4])
    ap.add_argument("--variants", nargs="+", default=["base"])
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--reps", type=int, default=bench.HELDOUT_REPS)
    ap.add_argument("--out", default=None, help="JSON file of every cell's mean errors")
    args = ap.parse_args()
    cache = json.loads(Path(args.cache).read_text())
    table = variants()
    n, seed = 100_000, 0
    data = bench.heldout_data("tuning", n, seed)
    # errors[variant][(name, eps)] = list of (W1, KS); best[(name, eps)] = (W1, KS)
    errors: dict[str, dict[tuple[str, float], list[tuple[float, float]]]] = {
        v: {} for v in args.variants
    }
    best: dict[tuple[str, float], tuple[float, float]] = {}
    for name, values in data.items():
        if args.only and name not in args.only:
            continue
        srt = np.sort(values)
        for eps in args.epsilons:
            comp = []
            for r in range(args.reps):
                comp.append(cache[f"tuning:{name}|{n}|{eps:g}|{seed}|{r}"])
            best[(name, eps)] = tuple(  # type: ignore[assignment]
                min(float(np.mean([c[m][i] for c in comp])) for m in bench.COMPETITORS)
                for i in (0, 1)
            )
            stats_of: dict[float | None, list[Any]] = {}
            for v in args.variants:
                ctx, kwargs, share = table[v]
                if share not in stats_of:
                    stats_of[share] = []
                    for r in range(args.reps):
                        seed_r = np.random.SeedSequence([seed, r, int(eps * 100)])
                        spec = AutoDistribution(epsilon=eps, expected_n=n, hh_share=share)
                        stats_of[share].append(spec.aggregate(spec.randomize(values, rng=seed_r)))
                with ctx():
                    errors[v][(name, eps)] = [
                        grid_errors(st.spec.estimate(st, **kwargs), srt, 1024)
                        for st in stats_of[share]
                    ]
            line = " ".join(
                f"{v}={np.mean([e[0] for e in errors[v][(name, eps)]]) / best[(name, eps)][0]:.2f}"
                f"/{np.mean([e[1] for e in errors[v][(name, eps)]]) / best[(name, eps)][1]:.2f}"
                for v in args.variants
            )
            print(f"{name:20s} eps={eps:<4g} {line}", flush=True)
    ratios: dict[str, dict[tuple[str, float, str], float]] = {}
    for v in args.variants:
        ratios[v] = {}
        for key, errs in errors[v].items():
            for i, metric in enumerate(("W1", "KS")):
                ratios[v][(*key, metric)] = float(np.mean([e[i] for e in errs])) / best[key][i]
    cells = sorted(next(iter(ratios.values())))
    for v in args.variants:
        vals = np.array([ratios[v][c] for c in cells])
        worst = cells[int(np.argmax(vals))]
        misses = [f"{c[0]} {c[1]:g} {c[2]} {ratios[v][c]:.2f}" for c in cells if ratios[v][c] > 1.1]
        print(
            f"{v:12s} within 10 %: {int((vals <= 1.1).sum())} of {len(cells)}, worst "
            f"{vals.max():.2f} ({worst[0]} eps {worst[1]:g} {worst[2]}); misses: {misses}"
        )
    oracle = np.array([min(ratios[v][c] for v in args.variants) for c in cells])
    print(
        f"oracle of the variants: {int((oracle <= 1.1).sum())} of {len(cells)}, worst {oracle.max():.2f}"
    )
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    v: {f"{c[0]}|{c[1]:g}|{c[2]}": r for c, r in rv.items()}
                    for v, rv in ratios.items()
                }
            )
        )


if __name__ == "__main__":
    main()
