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
and the ratio of their mean widths. Run from the repository root:
``PYTHONPATH=src python studies/range_interval_2d_noise.py --sets tuning``.
"""

from __future__ import annotations

import argparse

import numpy as np

from ldpkit.multidim import HDG
from ldpkit.multidim.ranges import RangeEstimate
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


def main() -> None:
    """Print the per-eps comparison for the sets asked for."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["tuning"], choices=sorted(SETS))
    args = ap.parse_args()
    for name in args.sets:
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
