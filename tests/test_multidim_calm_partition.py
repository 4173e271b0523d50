"""CALM's error bars when several groups answer one marginal: the groups split the users.

Every user joins one group at random, so the groups' samples of the population are not
independent (their errors sum to 0 over the whole population): a marginal averaged over
the tables of several groups (``ell > way``) has a smaller sampling error than the sum of
the groups' own. The error bars count it (``calm._partition_covariance``); here, at an
epsilon where the groups' sampling is most of the error, they match the spread over runs,
and the same check fails for the rule that takes the groups as independent and for a
wrong epsilon.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ldpkit import Stats
from ldpkit.multidim import CALM
from ldpkit.multidim import calm as calm_module

PAIRS = list(itertools.combinations(range(4), 2))
RUNS = 300


def population(n: int = 4000) -> np.ndarray:
    """Four correlated yes/no attributes of n fixed users."""
    gen = np.random.default_rng(0)
    a = gen.random(n) < 0.35
    b = gen.random(n) < np.where(a, 0.7, 0.25)
    c = gen.random(n) < 0.5
    d = gen.random(n) < np.where(b ^ c, 0.2, 0.6)
    return np.stack([a, b, c, d], axis=1).astype(np.int64)


def spread_and_coverage(
    epsilon: float = 4.0, reported: float | None = None, runs: int = RUNS
) -> tuple:
    """MSE / mean reported variance over every 2-way cell and run, its standard error, coverage.

    Collected: the four 3-way tables (4 groups), each pair covered by 2 of them. The
    reports use ``epsilon``; the error bars come from a spec of ``reported`` (default:
    the same).
    """
    x = population()
    truth = {p: np.histogramdd(x[:, list(p)], bins=[np.arange(3)] * 2)[0] / len(x) for p in PAIRS}
    spec = CALM(epsilon=epsilon, domain_sizes=(2,) * 4, oracle="grr", ell=3)
    other = spec if reported is None else spec.replace(epsilon=reported)
    gen = np.random.default_rng(1)
    sq, var, hits = np.zeros(runs), np.zeros(runs), []
    for r in range(runs):
        stats = spec.aggregate(spec.randomize(x, rng=gen))
        est = other.estimate(Stats(other, stats.n, **stats.arrays))
        for p in PAIRS:
            m = est.marginal(p)
            lo, hi = m.confidence_interval(0.05)
            sq[r] += float(np.square(m.table - truth[p]).sum())
            var[r] += float(m.variance.sum())
            hits.append(((lo <= truth[p]) & (truth[p] <= hi)).ravel())
    ratio = sq.sum() / var.sum()
    # the runs are independent; the cells of one run are not
    se = float(np.std(sq - ratio * var, ddof=1) / np.sqrt(runs) / var.mean())
    return ratio, se, float(np.concatenate(hits).mean())


def test_projected_error_bars_count_the_partition():
    """Ratio 1 within 4 standard errors (about 0.03), coverage 93-97 % (two-sided)."""
    ratio, se, cover = spread_and_coverage()
    assert se < 0.04, se
    assert abs(ratio - 1.0) <= 0.12, (ratio, se)
    assert 0.93 <= cover <= 0.97, cover


def test_independent_groups_rule_fails_the_same_check(monkeypatch):
    """Without the partition's covariance the bars are too wide (ratio about 0.64)."""
    monkeypatch.setattr(
        calm_module, "_partition_covariance", lambda spread, target, n: np.zeros_like(spread)
    )
    ratio, _, cover = spread_and_coverage(runs=100)
    assert ratio < 0.88 and cover > 0.97, (ratio, cover)


@pytest.mark.parametrize("reported", [3.0, 5.0])
def test_a_wrong_epsilon_fails_the_same_check(reported):
    """Error bars (and estimates) from the wrong epsilon miss the spread."""
    ratio, _, cover = spread_and_coverage(reported=reported, runs=40)
    assert abs(ratio - 1.0) > 0.12 and cover < 0.93, (ratio, cover)


def test_partition_term_by_hand():
    """Check one cell averaged over two groups with equal weights by hand.

    With g = 1/2 on the target cell of each of 2 groups and 0 elsewhere, ``s2_m = f (1 -
    f) / 4`` per group, so the term is ``(f (1 - f) / 2 - f (1 - f)) / (n - 1)``.
    """
    f = np.array([0.1, 0.25, 0.5])
    spread = 2 * f * (1 - f) / 4
    got = calm_module._partition_covariance(spread, f, 1001)
    np.testing.assert_allclose(got, -f * (1 - f) / 2 / 1000, rtol=1e-12)


def _sparse_population(n: int = 1500) -> np.ndarray:
    """Six yes/no attributes, four nearly equal and two rare: most 4-way cells are empty."""
    gen = np.random.default_rng(0)
    a = gen.random(n) < 0.5
    flip = [np.where(gen.random(n) < 0.97, a, ~a) for _ in range(2)]
    rare = [gen.random(n) < 0.05 for _ in range(2)]
    return np.stack([a, a, *flip, *rare], axis=1).astype(np.int64)


def _reported_over_exact(runs: int = 30) -> float:
    """Mean reported variance of every 2-way cell / its exact variance at the true tables.

    OLH, eps 4, ell = 4 (15 groups of 100 users): the plug-in's bias alone, without the
    noise of a measured MSE.
    """
    from ldpkit.multidim.marginals import MarginalTable

    x = _sparse_population()
    n, d = x.shape
    spec = CALM(epsilon=4.0, domain_sizes=(2,) * d, ell=4)
    gen = np.random.default_rng(1)
    reported = exact = 0.0
    for _ in range(runs):
        stats = spec.aggregate(spec.randomize(x, rng=gen))
        est, plain = spec.estimate(stats), spec.plain_tables(stats)
        null = [float(spec.marginal_oracle(m).variance(int(s))) for m, s in enumerate(stats.sizes)]
        true_tables = []
        for m, t in enumerate(plain):
            f = np.histogramdd(x[:, list(t.attributes)], bins=[np.arange(3)] * 4)[0] / n
            n_m, oracle = int(stats.sizes[m]), spec.marginal_oracle(m)
            var = oracle.variance(n_m, f.ravel()).reshape(f.shape)
            var = var + f * (1 - f) / n_m * (n - n_m) / (n - 1)
            true_tables.append(MarginalTable(t.attributes, f, var, n))
        for p in itertools.combinations(range(d), 2):
            reported += float(est.marginal(p).variance.sum())
            index = [i for i, t in enumerate(est.tables) if set(p) <= set(t.attributes)]
            w = np.array(
                [
                    1.0
                    / float(
                        est.tables[i]
                        .variance.sum(
                            axis=tuple(
                                j for j, a in enumerate(est.tables[i].attributes) if a not in p
                            )
                        )
                        .mean()
                    )
                    for i in index
                ]
            )
            weights = dict(zip(index, (w / w.sum()).tolist(), strict=True))
            tables = [t.table for t in true_tables]
            exact += float(
                spec.projection_variance(
                    true_tables, null, stats, p, weights, consistent=tables
                ).sum()
            )
    return reported / exact


def test_unclipped_plug_in_reports_the_exact_variance(monkeypatch):
    """Unclipped plug-in floored at f = 0: within 4 % of the exact variance; clipped: above."""
    new = _reported_over_exact()
    assert abs(new - 1.0) <= 0.04, new
    monkeypatch.setattr(calm_module, "PLUG_IN_UNCLIPPED", False)
    old = _reported_over_exact()
    assert old > 1.06, old
