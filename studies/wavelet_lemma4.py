"""The Haar wavelet's coefficient variances, measured, against WAV25's Lemma 4 (eq. 59).

Run: ``nice python studies/wavelet_lemma4.py [--reps 100] [--epsilons 0.5 1 2 4]
[--datasets "Beta(5,2)" "weeks worked"]``. Prints one row per (data set, eps, level) and
writes benchmarks/results/wavelet_lemma4.json.

For every level j the users of group j (``assignment="split"``: exactly ``n_j`` of them,
eq. 83) report by signed subset selection and the server unbiases
``a_jk = 2^(j/2) sum_i Y_i(k) / (n_j g)``, ``g = p (1 - e^-eps)`` (eq. 57). Over ``reps``
independent randomizations of the same values, the empirical variance of every a_jk is
compared with two formulas, both with f_jk the share of group j's values in cell k:

- ``paper``: Lemma 4 as printed, ``2^j (f (p (1 + e^-eps) - g^2) + (1 - f) q) / (n_j g^2)``;
- ``ours``: the same with ``2 q`` for the filler coordinates
  (:meth:`ldpkit.numeric.HaarWavelet.coefficient_variance`), since a zero coordinate is
  reported as +1 or -1, each with probability q.

Both formulas are conditional on the group S_j. Here the group is drawn anew in every
repetition, so both get the same group-sampling term added: the variance of the group's own
coefficient, a mean of n_j draws without replacement from the n users,
``2^j (f_jk - net_jk^2) / n_j * (n - n_j) / (n - 1)`` (net_jk = the whole data's
``a*_jk / 2^(j/2)``). It matters where the randomization noise is small: coarse levels at
large eps (at eps = 4, level 0 of weeks worked: 88 % of the variance).

A row's ratio is the sum over k of the empirical variances over the sum of the formula's.
With R repetitions one coefficient's variance ratio has a standard error of about
sqrt(2 / (R - 1)); the summed ratio's is smaller by up to sqrt(2^j). The two formulas agree
where m_j = 2^j and the level holds few cells (j = 0: the filler term has no coordinate).
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from _common import print_table, write_json
from ldpkit.numeric import HaarWavelet
from ldpkit.numeric.wavelet import haar_coefficients, haar_encode
from ldpkit.reproduce import wav25


def measure(values: np.ndarray, eps: float, reps: int, seed: int) -> list[dict[str, Any]]:
    """Rows (one per level) of empirical / formula variance ratios for one data set and eps."""
    n = values.size
    spec = HaarWavelet(epsilon=eps, expected_n=n)
    top = spec.effective_max_level
    truth = haar_coefficients(values, top)
    counts = spec.allocation_counts(n)
    estimates: list[list[np.ndarray]] = [[] for _ in range(top + 1)]
    gen = np.random.default_rng(np.random.SeedSequence([seed, int(eps * 100)]))
    for _ in range(reps):
        stats = spec.aggregate(spec.randomize(values, rng=gen, assignment="split"))
        sums = np.asarray(stats.sums, dtype=np.float64)
        n_j = np.asarray(stats.level_counts)
        for j in range(top + 1):
            law = spec.level_law(j)
            block = sums[2**j - 1 : 2 ** (j + 1) - 1]
            estimates[j].append(2.0 ** (j / 2.0) * block / (n_j[j] * law.gain))
    rows = []
    u = values  # the bench values are already on [0, 1]
    for j in range(top + 1):
        law = spec.level_law(j)
        n_j = int(counts[j])
        cell, _ = haar_encode(u, j)
        # Group j is a uniformly random subset of the users: its expected cell shares are the
        # whole data's.
        f = np.bincount(cell, minlength=2**j) / n
        net = truth[j] / 2.0 ** (j / 2.0)  # mean of s_i 1[cell_i = k] over all users
        # The group is drawn anew each repetition, so its own coefficients vary too: the
        # variance of a mean of n_j draws without replacement from the n users.
        sampling = 2.0**j * (f - net**2) / n_j * (n - n_j) / (n - 1)
        est = np.vstack(estimates[j])
        emp = est.var(axis=0, ddof=1)
        ours = spec.coefficient_variance(j, n_j, f) + sampling
        paper = (
            2.0**j * (f * law.variance_true + (1.0 - f) * law.q) / (n_j * law.gain**2) + sampling
        )
        bias = (est.mean(axis=0) - truth[j]) / np.sqrt(ours / reps)
        rows.append(
            {
                "eps": eps,
                "level": j,
                "n_j": n_j,
                "m_j": law.subset_size,
                "ratio_ours": float(emp.sum() / np.sum(ours)),
                "ratio_paper": float(emp.sum() / np.sum(paper)),
                "worst_cell_ours": float(np.max(np.abs(emp / ours - 1.0))),
                "sampling_share": float(np.sum(sampling) / np.sum(ours)),
                "max_abs_z_mean": float(np.max(np.abs(bias))),
                "se_one": math.sqrt(2.0 / (reps - 1)),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--datasets", nargs="+", default=["Beta(5,2)", "weeks worked"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = []
    t0 = time.process_time()
    for name in args.datasets:
        bench = wav25.load_bench(name, wav25.FULL, args.seed)
        for eps in args.epsilons:
            rows = measure(bench.values, eps, args.reps, args.seed)
            for row in rows:
                row["data"] = name
            out.extend(rows)
            print_table(
                f"{name} (n = {bench.n:,}), eps = {eps}, {args.reps} repetitions",
                rows,
                [
                    ("level", "j"),
                    ("n_j", "n_j"),
                    ("m_j", "m_j"),
                    ("ratio_ours", "emp / ours (2q)"),
                    ("ratio_paper", "emp / Lemma 4 (q)"),
                    ("worst_cell_ours", "max |emp/ours - 1|"),
                    ("sampling_share", "group-sampling share"),
                    ("max_abs_z_mean", "max |z| of the mean"),
                ],
            )
    ratios = np.array([r["ratio_ours"] for r in out])
    paper = np.array([r["ratio_paper"] for r in out])
    print(
        f"emp / ours: {ratios.min():.3f}..{ratios.max():.3f} (median {np.median(ratios):.3f}); "
        f"emp / Lemma 4 as printed: {paper.min():.3f}..{paper.max():.3f} "
        f"(median {np.median(paper):.3f}); {time.process_time() - t0:.0f} s CPU"
    )
    write_json("wavelet_lemma4", out, {"reps": args.reps, "seed": args.seed})


if __name__ == "__main__":
    main()
