"""Whether HDG's 2-D range interval over-states the noise of the post-processed answer.

HDG's 2-D interval takes as noise ``std_error^2`` (the plain 2-D grid's) plus the share the
1-D grids add by splitting partly covered cells (``_split_noise_variance``). Norm-Sub and the
consistency step shrink the 1-D answers' noise 4-7x (hence ``post_noise_variance`` for 1-D
boxes); this study measures, on the tuning set only unless ``--sets`` says otherwise, whether
the same holds for 2-D answers, with the same parametric bootstrap through the
post-processing (each replicate's grids give a response matrix and an answer), and the
coverage the interval would have with that noise in place of the current one.

Printed per set and eps: the ratio of the bootstrap noise to the current noise term
(median), the coverage of the current interval, of the interval with the bootstrap noise,
and the ratio of their mean widths. ``--grids``: for TDG and UniformGrid instead, whether
HDG's dependence weight would narrow their 2-D intervals (the share of the Frechet joint
term in the model) and the scale of the model's standard deviation that 95 % coverage
needs per set and eps (the data dependence that ruled out one fitted scale). Run from the
repository root: ``PYTHONPATH=src python studies/range_interval_2d_noise.py --sets tuning``.
"""

from __future__ import annotations

import argparse

import numpy as np

from ldpkit.multidim import HDG, TDG, UniformGrid
from ldpkit.multidim.ranges import RangeEstimate, _coverage, cramers_v, dependence_weight
from range_interval_dependence import EPSILONS, SETS, Z, boxes_2d, load


def collect(name: str) -> dict[str, np.ndarray]:
    """Return, per 2-D box and report, the error, the current terms and the bootstrap noise."""
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
            reps = [
                RangeEstimate(tuple(r), est.cell_variance, est.n, spec=spec)
                for r in est._noise_replicates()
            ]
            for box, t in zip(boxes, truths, strict=True):
                q = est._ranges(box)
                a, b = sorted(q)
                answer = est._range_query(q)
                values = np.array([r._range_query(q) for r in reps])
                recs.append(
                    {
                        "eps": eps,
                        "err": abs(answer - t),
                        "noise": est._std_error(q) ** 2 + est._split_noise_variance(a, b, q),
                        "boot": float(np.mean((values - answer) ** 2)),
                        "model": est._cell_error_variance(q),
                    }
                )
    return {k: np.array([r[k] for r in recs]) for k in recs[0]}


def truths_of(x: np.ndarray, boxes: list[dict[int, tuple[float, float]]]) -> list[float]:
    """Return the true fraction of users inside every box."""
    out = []
    for box in boxes:
        inside = np.ones(len(x), dtype=bool)
        for a, (b0, b1) in box.items():
            inside &= (x[:, a] >= b0) & (x[:, a] <= b1)
        out.append(float(inside.mean()))
    return out


def grids(name: str) -> None:
    """Print TDG's and UniformGrid's 2-D model split into edge and joint terms."""
    data, box_seed, first = SETS[name]
    x = load(data)
    boxes = boxes_2d(x.shape[1], data["low"], data["high"], box_seed)
    truths = truths_of(x, boxes)
    for cls in (TDG, UniformGrid):
        for eps in EPSILONS:
            spec = cls(epsilon=eps, low=data["low"], high=data["high"], population=len(x))
            rec = []
            for rep in range(first, first + 3):
                est = spec.run(x, rng=rep)
                for box, t in zip(boxes, truths, strict=True):
                    q = est._ranges(box)
                    a, b = sorted(q)
                    mat = est._pair_matrix(a, b)
                    ca, cb = _coverage(*q[a], mat.shape[0]), _coverage(*q[b], mat.shape[1])
                    c = ca[:, None] * cb[None, :]
                    sd = np.where((c > 0) & (c < 1), mat * np.sqrt(1 / 3 - c + c * c), 0.0)
                    rows = np.where(cb[None, :] > 0, sd, 0.0).sum(axis=1)[(ca > 0) & (ca < 1)]
                    cols = np.where(ca[:, None] > 0, sd, 0.0).sum(axis=0)[(cb > 0) & (cb < 1)]
                    edges = float(np.sum(rows**2) + np.sum(cols**2))
                    joint = est._pair_error_variance(a, b, q) - edges
                    err = abs(est._range_query(q) - t)
                    rec.append((err, est._std_error(q) ** 2, edges, joint, cramers_v(mat)))
            r = np.array(rec)
            w = np.array([dependence_weight(v) for v in r[:, 4]])
            now = r[:, 1] + r[:, 2] + r[:, 3]
            weighted = r[:, 1] + r[:, 2] + w * r[:, 3]
            need = np.sqrt(np.maximum(0.0, (r[:, 0] / Z) ** 2 - r[:, 1]) / (r[:, 2] + r[:, 3]))
            print(
                f"{name} {cls.__name__} eps {eps}: coverage {np.mean(r[:, 0] <= Z * np.sqrt(now)):.3f}"
                f", weighted {np.mean(r[:, 0] <= Z * np.sqrt(weighted)):.3f}, joint share "
                f"{r[:, 3].sum() / (r[:, 2] + r[:, 3]).sum():.3f}, V {r[:, 4].mean():.2f}, "
                f"model sd scale 95 % needs {np.quantile(need, 0.95):.2f}"
            )


def main() -> None:
    """Print the per-eps comparison for the sets asked for."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["tuning"], choices=sorted(SETS))
    ap.add_argument("--grids", action="store_true", help="TDG and UniformGrid instead")
    args = ap.parse_args()
    for name in args.sets:
        if args.grids:
            grids(name)
            continue
        t = collect(name)
        for eps in EPSILONS:
            m = t["eps"] == eps
            ratio = np.median(t["boot"][m] / t["noise"][m])
            sd_now = np.sqrt(t["noise"][m] + t["model"][m])
            sd_new = np.sqrt(t["boot"][m] + t["model"][m])
            cov_now = np.mean(t["err"][m] <= Z * sd_now)
            cov_new = np.mean(t["err"][m] <= Z * sd_new)
            print(
                f"{name} eps {eps}: boot/noise {ratio:.2f}, coverage now {cov_now:.3f}, "
                f"with boot {cov_new:.3f}, width ratio {np.mean(sd_new) / np.mean(sd_now):.2f}"
            )


if __name__ == "__main__":
    main()
