"""Whether the reported variance of a sum of plain OLH estimates matches its spread.

OLH hashes item v with the multiply-add-shift family, pairwise but not 3-wise independent:
the estimates of a range of adjacent items have positively correlated errors. This study
runs each path that turns local-hashing estimates into the variance of a sum, on fixed
seeds, and prints per path, epsilon, hash keys (plain items or ``mix_items=True``) and
query the spread of the answers over the runs divided by the mean reported variance:

* ``range_sum``: 1-D ``OLH`` range sums from :func:`ldpkit.queries.range_answers`; the
  users are fixed (as :attr:`FrequencyEstimate.variance` assumes), the randomization is
  redrawn; reported: ``summed`` (the items' variances added, what a user did before) and
  ``exact`` (:func:`ldpkit.queries.range_variances`);
* ``cfo_range``: ``CFOBinning`` with its OLH oracle, ``Distribution.range_interval``'s
  variance (users drawn afresh each run: the interval covers the population's range);
* ``hh_range``: ``HierarchicalHistogram`` with OLH levels, the same;
* ``groupmean``: ``GroupMean(oracle="olh")``, each group's share (a sum of its two plain
  items ``2c``, ``2c + 1``) and mean, 8 groups, n = 3000, users fixed.

Data: the tuning shape, 64 bins of beta(5, 2) values (n = 2000), and a held-out shape
not looked at while building the fix, 100 bins of a two-component normal mixture
(0.6 N(0.3, 0.08) + 0.4 N(0.75, 0.05), clipped to [0, 1]; n = 3000). With R runs the
ratio's standard error is about ``sqrt(2 / R)`` (0.032 at R = 2000).

Conclusion recorded in docs/design/METHODS.md ("Sums of plain local-hashing estimates").
Run from the repository root: ``PYTHONPATH=src python studies/olh_sum_variance.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ldpkit.frequency import OLH, _hash_moments
from ldpkit.multidim import GroupMean
from ldpkit.numeric import CFOBinning, HierarchicalHistogram
from ldpkit.queries import range_answers, range_variances


def beta_sample(gen: np.random.Generator, n: int) -> np.ndarray:
    """Return n values of beta(5, 2) (the tuning shape)."""
    return gen.beta(5.0, 2.0, size=n)


def mixture_sample(gen: np.random.Generator, n: int) -> np.ndarray:
    """Return n values of the held-out two-component normal mixture, clipped to [0, 1]."""
    first = gen.random(n) < 0.6
    x = np.where(first, gen.normal(0.3, 0.08, n), gen.normal(0.75, 0.05, n))
    return np.clip(x, 0.0, 1.0)


SHAPES = {
    "beta(5,2)": (beta_sample, 64, 2000, [(40, 48), (32, 64), (44, 52), (0, 32)]),
    "mixture (held out)": (mixture_sample, 100, 3000, [(20, 40), (0, 50), (70, 80), (25, 75)]),
}


def bins(x: np.ndarray, d: int) -> np.ndarray:
    """Return the bin index of each value in [0, 1] among d equal bins."""
    return np.minimum((x * d).astype(np.int64), d - 1)


def range_sum(shape: str, eps: float, mix: bool, runs: int) -> list[tuple[str, float, float]]:
    """Return per range (name, spread / summed variances, spread / exact variance)."""
    sample, d, n, ranges = SHAPES[shape]
    values = bins(sample(np.random.default_rng(1), n), d)
    spec = OLH(epsilon=eps, domain_size=d, mix_items=mix)
    r = np.asarray(ranges)
    answers, summed, exact = [], [], []
    for run in range(runs):
        est = spec.estimate(spec.aggregate(spec.randomize(values, rng=run)))
        answers.append(range_answers(est, r))
        summed.append(range_answers(est.variance, r))  # the items' variances added
        exact.append(range_variances(est, r))
    spread = np.var(np.array(answers), axis=0, ddof=1)
    return [
        (f"[{lo},{hi})", s / v1, s / v2)
        for (lo, hi), s, v1, v2 in zip(
            ranges, spread, np.mean(summed, axis=0), np.mean(exact, axis=0)
        )
    ]


def distribution_range(
    kind: str, shape: str, eps: float, runs: int, n: int
) -> list[tuple[str, float, float]]:
    """Return per range (name, spread / ideal-hash variance, spread / reported variance)."""
    sample, d, _, ranges = SHAPES[shape]
    if kind == "cfo":
        spec = CFOBinning(epsilon=eps, buckets=d)
        assert spec.frequency_oracle.name == "OLH"
    else:
        spec = HierarchicalHistogram(epsilon=eps, buckets=d, branching=4)
    a = np.array([lo / d for lo, _ in ranges])
    b = np.array([hi / d for _, hi in ranges])
    w = None
    answers, reported, ideal = [], [], []
    for run in range(runs):
        gen = np.random.default_rng(10_000 + run)
        dist = spec.run(sample(gen, n), rng=gen)
        answers.append(dist.range(a, b))
        if w is None:
            w = dist._cdf_weights(b) - dist._cdf_weights(a)
        reported.append(dist._moments(w)[1] ** 2)
        # the ideal hash's variance (what was reported before the triple term)
        saved = _hash_moments.plain_triple_excess
        _hash_moments.plain_triple_excess = lambda u, g: None
        try:
            ideal.append(dist._moments(w)[1] ** 2)
        finally:
            _hash_moments.plain_triple_excess = saved
    spread = np.var(np.array(answers), axis=0, ddof=1)
    rep, old = np.mean(reported, axis=0), np.mean(ideal, axis=0)
    return [(f"[{lo},{hi})", s / v0, s / v) for (lo, hi), s, v0, v in zip(ranges, spread, old, rep)]


def groupmean(eps: float, runs: int) -> list[tuple[str, float, float]]:
    """Return per group and quantity (name, spread / ideal-hash variance, spread / reported)."""
    gen = np.random.default_rng(7)
    shares = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.07, 0.05, 0.03])
    g = gen.choice(shares.size, size=3000, p=shares)
    rows = np.stack([g, np.clip(gen.normal(0.3 + 0.05 * g, 0.2), 0.0, 1.0)], axis=1)
    spec = GroupMean(epsilon=eps, domain_size=shares.size, low=0.0, high=1.0, oracle="olh")
    got: dict[str, list] = {k: [] for k in ("share", "mean", "sv", "mv", "sv0", "mv0")}
    for run in range(runs):
        # seeds apart from the data's 7: GroupMean rounds with the first raw draws of its
        # generator, and default_rng(7)'s are the uniforms that chose the groups above (run 7
        # rounded group 0's users up far too often: its mean's spread / reported was 1.14-1.28)
        stats = spec.aggregate(spec.randomize(rows, rng=10_000 + run))
        est = spec.estimate(stats)
        saved = _hash_moments.plain_triple_excess
        _hash_moments.plain_triple_excess = lambda u, g: None
        try:
            old = spec.estimate(stats)
        finally:
            _hash_moments.plain_triple_excess = saved
        for key, value in (
            ("share", est.shares),
            ("mean", est.means),
            ("sv", est.share_variance),
            ("mv", est.variance),
            ("sv0", old.share_variance),
            ("mv0", old.variance),
        ):
            got[key].append(value)
    out = []
    for what, var, var0 in (("share", "sv", "sv0"), ("mean", "mv", "mv0")):
        spread = np.var(np.array(got[what]), axis=0, ddof=1)
        rep, rep0 = np.mean(got[var], axis=0), np.mean(got[var0], axis=0)
        for c in range(shares.size):
            out.append((f"{what} {c}", spread[c] / rep0[c], spread[c] / rep[c]))
    return out


def main() -> None:
    """Print the ratios of every path."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--numeric-runs", type=int, default=1000)
    parser.add_argument("--only", choices=["range_sum", "cfo", "hh", "groupmean"], default=None)
    args = parser.parse_args()
    print("path        shape               eps  keys   range     spread/summed  spread/reported")
    for shape in SHAPES if args.only in (None, "range_sum") else ():
        for eps in (2.0, 4.0):
            for mix in (False, True):
                t = time.perf_counter()
                rows = range_sum(shape, eps, mix, args.runs)
                keys = "mixed" if mix else "plain"
                for name, old, new in rows:
                    print(
                        f"range_sum   {shape:19s} {eps:3.0f}  {keys:6s} {name:9s} "
                        f"{old:13.3f}  {new:15.3f}"
                    )
                print(f"  ({time.perf_counter() - t:.0f} s)", flush=True)
    for kind, n in (("cfo", 2000), ("hh", 20_000)):
        if args.only not in (None, kind):
            continue
        for shape in SHAPES:
            t = time.perf_counter()
            rows = distribution_range(kind, shape, 2.0, args.numeric_runs, n)
            for name, old, new in rows:
                print(f"{kind}_range   {shape:19s}   2  plain  {name:9s} {old:13.3f}  {new:15.3f}")
            print(f"  ({time.perf_counter() - t:.0f} s)", flush=True)
    for eps in (2.0, 4.0) if args.only in (None, "groupmean") else ():
        t = time.perf_counter()
        for name, old, new in groupmean(eps, args.numeric_runs):
            print(
                f"groupmean   n=3000, 8 groups    {eps:3.0f}  plain  {name:9s} {old:13.3f}  {new:15.3f}"
            )
        print(f"  ({time.perf_counter() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
