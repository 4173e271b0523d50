"""Whether any range interval can cover 92-98 % on every data set: two populations, one set of reports.

A grid mechanism (HDG, TDG, UniformGrid) sees a user only through her cell of the grid she is
assigned: moving every point anywhere inside the cells of every grid the spec uses changes
no report. This study builds that second population, ``moved``: each attribute of every
point redrawn uniformly inside its cell of the common refinement of the spec's grids on
that attribute. The spec's reports for the real data and for ``moved`` are then the same
bytes for the same seed (checked), so every interval computed from them is the same, while
the true answer of a box that cuts cells differs. On ``moved`` the uniformity assumption
behind the answer is exact, so the within-cell error is only the sampling of the redraw.

For each (method, attributes, eps) cell it prints the shipped interval's coverage on the
real data and on ``moved``, and, for the one-parameter family "the shipped interval's
half-width times r" (around the same answer, before the hard-range cut), the range of r
that puts coverage in 92-98 % on each population. Where the two ranges do not overlap, no
rescaling of the shipped interval is in the band on both, although both populations give
the same reports. Run from the repository root:
``PYTHONPATH=src python studies/range_interval_identification.py --sets tuning hhmm cps``.
Conclusion recorded in docs/design/METHODS.md (range intervals).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from scipy import special

from range_interval_random import EPSILONS, METHODS, SETS, boxes, load

Z = float(-special.ndtri(0.025))


def moved_population(spec: Any, x: np.ndarray, seed: int) -> np.ndarray:
    """Return ``x`` with each attribute redrawn uniformly inside its refined cell.

    An attribute the spec declares integer gets a uniform integer among the cell's.
    """
    gen = np.random.default_rng(seed)
    out = np.empty_like(x)
    for a in range(x.shape[1]):
        gs = {
            spec.grid_shape(m)[i]
            for m, attrs in enumerate(spec.grids)
            for i, b in enumerate(attrs)
            if b == a
        }
        fractions = np.unique(np.concatenate([np.arange(g + 1) / g for g in gs]))
        lo, hi = spec.low[a], spec.high[a]
        t = (x[:, a] - lo) / (hi - lo)
        j = np.clip(np.searchsorted(fractions, t, side="right") - 1, 0, fractions.size - 2)
        if a in spec.integer_attributes:  # a uniform integer of the cell's integers
            first = np.ceil(lo + fractions[j] * (hi - lo))
            last = np.where(
                j == fractions.size - 2,
                np.floor(hi),
                np.ceil(lo + fractions[j + 1] * (hi - lo)) - 1,
            )
            count = np.maximum(last - first + 1, 1)
            out[:, a] = first + np.floor(gen.random(x.shape[0]) * count)
        else:
            u = fractions[j] + gen.random(x.shape[0]) * (fractions[j + 1] - fractions[j])
            out[:, a] = lo + u * (hi - lo)
    same = all(
        np.array_equal(
            spec._cell(x, attrs, spec.grid_shape(m)), spec._cell(out, attrs, spec.grid_shape(m))
        )
        for m, attrs in enumerate(spec.grids)
    )
    if not same:  # a redrawn point that rounding put across an edge: keep the original there
        for m, attrs in enumerate(spec.grids):
            bad = spec._cell(x, attrs, spec.grid_shape(m)) != spec._cell(
                out, attrs, spec.grid_shape(m)
            )
            out[bad] = x[bad]
    return out


def truth(x: np.ndarray, box: dict[int, tuple[float, float]]) -> float:
    """Return the fraction of rows of ``x`` inside ``box``."""
    inside = np.ones(x.shape[0], dtype=bool)
    for a, (b0, b1) in box.items():
        inside &= (x[:, a] >= b0) & (x[:, a] <= b1)
    return float(inside.mean())


def band(ratio: np.ndarray) -> tuple[float, float]:
    """Return the r range with coverage in [0.92, 0.98] for intervals ``answer +- r half``."""
    return float(np.quantile(ratio, 0.92)), float(np.quantile(ratio, 0.98))


def run(name: str, reps: int) -> None:
    """Print the table of one benchmark set."""
    data, box_seed, first = SETS[name]
    x = load(data)
    bx = boxes(x.shape[1], data["low"], data["high"], box_seed)
    print(f"\n## {name} ({x.shape[0]} rows, {reps} reports per cell)\n")
    print(
        "| method | dims | eps | cover real | cover moved | r band real | r band moved | overlap |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for cls in METHODS:
        for eps in EPSILONS:
            # the grids' granularities depend on eps: the moved population too
            spec = cls(
                epsilon=eps,
                low=data["low"],
                high=data["high"],
                population=x.shape[0],
                integer=data["integer"],
            )
            moved = moved_population(spec, x, seed=box_seed)
            truths = {
                lam: (np.array([truth(x, b) for b in bs]), np.array([truth(moved, b) for b in bs]))
                for lam, bs in bx.items()
            }
            rec: dict[int, list[tuple[float, float, float, float, float]]] = {1: [], 2: [], 3: []}
            for rep in range(first, first + reps):
                r_real, r_moved = spec.randomize(x, rng=rep), spec.randomize(moved, rng=rep)
                assert all(
                    np.array_equal(r_real.arrays[k], r_moved.arrays[k]) for k in r_real.arrays
                )
                est = spec.estimate(spec.aggregate(r_real))
                for lam, bs in bx.items():
                    for i, box in enumerate(bs):
                        q = est._ranges(box)
                        lo, hi = est.interval(box)
                        answer = est._range_query(q)
                        # the half-width before the hard-range cut (the interval's own model)
                        raw = est._model_half_width(q, Z)
                        rec[lam].append((lo, hi, answer, raw, float(i)))
            for lam in (1, 2, 3):
                arr = np.array(rec[lam])
                idx = arr[:, 4].astype(int)
                t_real, t_moved = truths[lam][0][idx], truths[lam][1][idx]
                lo, hi, answer, raw = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
                cov_r = np.mean((lo <= t_real) & (t_real <= hi))
                cov_m = np.mean((lo <= t_moved) & (t_moved <= hi))
                br = band(np.abs(answer - t_real) / raw)
                bm = band(np.abs(answer - t_moved) / raw)
                overlap = "yes" if max(br[0], bm[0]) <= min(br[1], bm[1]) else "**no**"
                print(
                    f"| {cls.__name__} | {lam}-D | {eps:g} | {100 * cov_r:.1f} | {100 * cov_m:.1f} | "
                    f"{br[0]:.2f}-{br[1]:.2f} | {bm[0]:.2f}-{bm[1]:.2f} | {overlap} |",
                    flush=True,
                )


def main() -> None:
    """Run the sets given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["tuning"], choices=sorted(SETS))
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    for name in args.sets:
        run(name, args.reps)


if __name__ == "__main__":
    main()
