"""What Square Wave reports can reach: per cell, every smoothing strength's error and the
held-out scores AutoDistribution chooses from, stored so that selection rules can be compared
offline.

Run: ``nice python studies/auto_oracle.py [--reps 4] [--epsilons ...] [--datasets ...]``.
Writes benchmarks/results/auto_oracle.npz (per data set, eps, repetition: the CDF of every
candidate fit at the 256 grid points, the truth there, the held-out score of every
candidate on each of the two folds) and prints, per cell, each candidate's mean W1 and KS
over the best competitor's (the competitors' 30-repetition means of
docs/results/wav25/wav25.md: SW-EMS, SW-EM, HH with the CDF fit, Haar wavelet J-2) and the
"SW oracle": the best single candidate per cell, i.e. what any choice among these fits of
the same reports could reach at most. ``--analyze FILE.npz`` compares selection rules
offline on a saved run (which candidates, best single score or pseudo-BMA average, one fold
held out or both).
"""

from __future__ import annotations

import argparse
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import RESULTS
from ldpkit.experiments.numeric import cdf_grid, empirical_cdf
from ldpkit.numeric import AutoDistribution, Distribution
from ldpkit.numeric.auto import _TINY, _Fitter, _split
from ldpkit.reproduce import wav25

#: Candidates: (label, strength, tolerance rule). "EM*" is plain EM run to near-convergence
#: (tol 1e-6 per report, up to 20,000 iterations).
CANDIDATES: tuple[tuple[str, float, str], ...] = (
    ("EM", 0.0, "sw20"),
    ("EM*", 0.0, "tight"),
    ("s0.125", 0.125, "sw20"),
    ("EMS", 0.5, "sw20"),
    ("s2", 2.0, "sw20"),
    ("s8", 8.0, "sw20"),
    ("s32", 32.0, "sw20"),
)
COMPETITORS = ("SW-EMS", "SW-EM", "HH", "Wavelet J-2")
DOC = Path(__file__).resolve().parents[1] / "docs" / "results" / "wav25" / "wav25.md"


def reference() -> dict[tuple[str, str, float], dict[str, float]]:
    """(metric, data set, eps) -> {method: 30-repetition mean} from the WAV25 report."""
    out: dict[tuple[str, str, float], dict[str, float]] = {}
    metric = dataset = None
    eps: list[float] = []
    in_results = False
    for line in DOC.read_text().splitlines():
        # Only the main grid's tables: other sections (SW-EM's stopping rules, n = 1e6) reuse
        # the same "### W1 on <data set>" headings with other numbers.
        if line.startswith("## "):
            in_results = line.strip() == "## Results"
            metric = None
            continue
        if not in_results:
            continue
        m = re.match(r"^### (W1|KS) on (.+)$", line)
        if m:
            metric, dataset = m.group(1), m.group(2)
            continue
        if line.startswith("### "):
            metric = None
        if metric is None:
            continue
        if line.startswith("| method"):
            eps = [float(c.strip()[2:]) for c in line.strip("|").split("|")[1:]]
        elif line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] in COMPETITORS:
                for e, c in zip(eps, cells[1:], strict=True):
                    out.setdefault((metric, dataset, e), {})[cells[0]] = float(c.split("±")[0])
    return out


def tolerance(eps: float, rule: str, strength: float, share: float, n: int) -> float:
    if rule == "tight":
        return 1e-6 * n * share
    base = 1e-3 * math.exp(min(eps, 700.0)) if strength == 0 else 1e-3
    return base * share


def run_rep(values: np.ndarray, eps: float, seed_r: Any, grid: np.ndarray) -> dict[str, Any]:
    auto = AutoDistribution(epsilon=eps, expected_n=values.size)
    counts = np.asarray(auto.aggregate(auto.randomize(values, rng=seed_r)).counts, np.int64)
    m = auto._outputs_by_inputs()
    n = int(counts.sum())
    cdfs = np.empty((len(CANDIDATES), grid.size))
    fitter = _Fitter(m, counts)
    previous = None
    for k in sorted(range(len(CANDIDATES)), key=lambda k: -CANDIDATES[k][1]):
        _, s, rule = CANDIDATES[k]
        start = previous if s > 0 else None
        theta, _ = fitter.fit(s, tolerance(eps, rule, s, 1.0, n), 20_000, start)
        if s > 0:
            previous = theta
        cdfs[k] = Distribution(theta, 0.0, 1.0).cdf(grid)
    # Held-out scores, both folds, every candidate (no early stop), fold fits as in estimate.
    parts = _split(counts, 2, np.random.default_rng(0))
    scores = np.zeros((2, len(CANDIDATES)))
    for f, part in enumerate(parts):
        train = counts - part
        fitter = _Fitter(m, train)
        previous = None
        for k in sorted(range(len(CANDIDATES)), key=lambda k: -CANDIDATES[k][1]):
            _, s, rule = CANDIDATES[k]
            share = float(train.sum()) / n
            cap = 20_000 if rule == "tight" else 1000
            theta, _ = fitter.fit(s, tolerance(eps, rule, s, share, n), cap, previous)
            if s > 0:
                previous = theta
            scores[f, k] = float(part @ np.log(np.maximum(m @ theta, _TINY)))
    return {"cdfs": cdfs, "scores": scores}


def _errors(cdf: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    gap = np.abs(cdf - truth)
    return gap.mean(axis=-1), gap.max(axis=-1)


def _combine(
    cdfs: np.ndarray, scores: np.ndarray, idx: list[int], rule: str, floor: float = 0.05
) -> np.ndarray:
    """One repetition's estimate (CDF on the grid) under a selection rule: "best" / "avg"
    (pseudo-BMA weights, those below ``floor`` dropped) on the first fold's scores ("_f0")
    or both folds' ("_cv")."""
    sc = (scores[0] if rule.endswith("_f0") else scores.sum(axis=0))[idx]
    c = cdfs[idx]
    if rule.startswith("best"):
        return c[int(np.argmax(sc))]  # type: ignore[no-any-return]
    w = np.exp(sc - sc.max())
    w[w < floor] = 0.0
    return (w / w.sum()) @ c  # type: ignore[no-any-return]


def analyze(path: Path) -> None:
    """Per candidate set: the SW oracle (best candidate per cell in hindsight) and the
    selection rules, as (cells within 10 % of the best competitor, cells, worst ratio,
    geometric-mean ratio)."""
    ref = reference()
    z = np.load(path)
    cells = sorted(
        {tuple(k.split("|")[:2]) for k in z.files if k.endswith("|cdfs")},
        key=lambda x: (x[0], float(x[1])),
    )

    def summary(ratios: list[float]) -> str:
        x = np.asarray(ratios)
        return (
            f"{int((x <= 1.1).sum())}/{x.size} within 10 %, within 1.5x {int((x <= 1.5).sum())}, "
            f"worst {x.max():.2f}, geo-mean {math.exp(np.log(x).mean()):.3f}"
        )

    def best_of(metric: str, name: str, eps: str) -> float:
        return min(ref[(metric, name, float(eps))].values())

    sets = {
        "(0, 0.5, 2, 8, 32) (before)": [0, 3, 4, 5, 6],
        "(0, 0.5, 2, 8) (now)": [0, 3, 4, 5],
        "(0, 0.125, 0.5, 2, 8)": [0, 2, 3, 4, 5],
        "(0, 0.125, 0.5): none to EMS": [0, 2, 3],
        "(0, 0.5, 2, 8) + EM*": [0, 1, 3, 4, 5],
        "(EM*, 0.5, 2, 8): EM* for EM": [1, 3, 4, 5],
        "all seven": list(range(len(CANDIDATES))),
    }
    for label, idx in sets.items():
        oracle: list[float] = []
        rules: dict[str, list[float]] = {r: [] for r in ("best_f0", "best_cv", "avg_f0", "avg_cv")}
        for name, eps in cells:
            truth = z[f"{name}|truth"]
            cd, sc = z[f"{name}|{eps}|cdfs"], z[f"{name}|{eps}|scores"]
            w1, ks = _errors(cd[:, idx], truth)
            oracle += [w1.mean(0).min() / best_of("W1", name, eps)]
            oracle += [ks.mean(0).min() / best_of("KS", name, eps)]
            for rule, out in rules.items():
                est = np.stack([_combine(cd[r], sc[r], idx, rule) for r in range(cd.shape[0])])
                w1, ks = _errors(est, truth)
                out += [w1.mean() / best_of("W1", name, eps), ks.mean() / best_of("KS", name, eps)]
        print(f"{label}\n  SW oracle: {summary(oracle)}")
        for rule, out in rules.items():
            print(f"  {rule}: {summary(out)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4])
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--datasets", nargs="+", default=list(wav25.DATASETS))
    ap.add_argument("--analyze", type=Path, help="only analyze a saved .npz")
    args = ap.parse_args()
    if args.analyze:
        analyze(args.analyze)
        return
    grid = cdf_grid(256)
    ref = reference()
    store: dict[str, np.ndarray] = {}
    t0 = time.perf_counter()
    for name in args.datasets:
        bench = wav25.load_bench(name, wav25.FULL, args.seed)
        truth = empirical_cdf(np.sort(bench.values), grid)
        store[f"{name}|truth"] = truth
        for eps in args.epsilons:
            reps = []
            for r in range(args.reps):
                seed_r = np.random.SeedSequence([args.seed, r, int(eps * 100)])
                reps.append(run_rep(bench.values, eps, seed_r, grid))
            cdfs = np.stack([x["cdfs"] for x in reps])
            scores = np.stack([x["scores"] for x in reps])
            store[f"{name}|{eps:g}|cdfs"] = cdfs
            store[f"{name}|{eps:g}|scores"] = scores
            gap = np.abs(cdfs - truth)
            w1, ks = gap.mean(axis=2).mean(axis=0), gap.max(axis=2).mean(axis=0)
            line = [f"{name:18s} eps={eps:<4g}"]
            for metric, err in (("W1", w1), ("KS", ks)):
                best = min(ref[(metric, name, eps)].values())
                line.append(
                    f"{metric}: "
                    + " ".join(f"{c[0]}={e / best:.2f}" for c, e in zip(CANDIDATES, err))
                )
            print("  ".join(line), f"({time.perf_counter() - t0:.0f} s)", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(RESULTS / "auto_oracle.npz", **store)
    print(f"wrote {RESULTS / 'auto_oracle.npz'}")


if __name__ == "__main__":
    main()
