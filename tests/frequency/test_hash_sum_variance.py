"""Variances of sums of local-hashing estimates: the family's triple collisions included.

OLH/BLH over plain item indices hash with a pairwise (not 3-wise) independent family, so
the estimates of adjacent items have positively correlated errors and a range sum varies
more than its items' summed variances. ``queries.range_variances`` and the numeric
intervals add the triple term (``ldpkit.frequency._hash_moments``); these tests check the
reported variance against the spread of the answers over fixed seeds, and that the old
reporting (summed per-item variances) fails the same check on plain keys.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import GRR, OUE, HadamardResponse, Stats
from ldpkit.consistency import norm_sub
from ldpkit.estimate import IntervalWarning
from ldpkit.frequency import BLH, OLH
from ldpkit.frequency._hash_moments import excess_functions, triple_excess
from ldpkit.frequency.hashing import mix_item_keys
from ldpkit.numeric import CFOBinning
from ldpkit.queries import range_answers, range_variances, set_answers, set_variances
from ldpkit.testing import variance_ratio_bounds

D, N = 64, 2000
RANGES = np.array([[32, 64], [40, 48], [0, 32]])


def beta_bins(seed: int = 1, n: int = N, d: int = D) -> np.ndarray:
    """Return n bin indices of beta(5, 2) values among d equal bins."""
    x = np.random.default_rng(seed).beta(5.0, 2.0, size=n)
    return np.minimum((x * d).astype(np.int64), d - 1)


def spread_and_reports(spec, values: np.ndarray, runs: int):
    """Return the answers' variance over the runs, the summed and the exact variances."""
    answers, summed, exact = [], [], []
    for run in range(runs):
        est = spec.estimate(spec.aggregate(spec.randomize(values, rng=run)))
        answers.append(range_answers(est, RANGES))
        summed.append(range_answers(est.variance, RANGES))
        exact.append(range_variances(est, RANGES))
    spread = np.var(np.array(answers), axis=0, ddof=1)
    return spread, np.mean(summed, axis=0), np.mean(exact, axis=0)


@pytest.mark.parametrize("mix_items", [False, True, None])
def test_range_sum_spread_matches_reported_variance(mix_items: bool | None) -> None:
    # plain items (every earlier spec), mixed keys, and OLH()'s default (mixed), at eps 4
    # (g = 56), where the plain family's correlation is largest
    runs = 500
    if mix_items is None:
        spec = OLH(epsilon=4.0, domain_size=D)
        assert spec.mix_items
    else:
        spec = OLH(epsilon=4.0, domain_size=D, mix_items=mix_items)
    spread, summed, exact = spread_and_reports(spec, beta_bins(), runs)
    low, high = variance_ratio_bounds(runs - 1, 1e-4)
    ratio = spread / exact
    assert np.all((low <= ratio) & (ratio <= high)), (ratio, low, high)
    if mix_items is False:
        # the old reporting, summed per-item variances, is rejected by the same check
        old = spread / summed
        assert old[0] > high and old[0] > 1.8, old
    else:  # mixed keys: the summed item variances are the sum's too
        np.testing.assert_allclose(exact, summed, rtol=0.05)


def test_wrong_law_fails_the_check() -> None:
    # the exact variance of an eps = 2 spec does not explain eps = 4 answers
    runs = 500
    values = beta_bins()
    spec4 = OLH(epsilon=4.0, domain_size=D)
    spec2 = OLH(epsilon=2.0, domain_size=D)
    answers, wrong = [], []
    for run in range(runs):
        est = spec4.estimate(spec4.aggregate(spec4.randomize(values, rng=run)))
        answers.append(range_answers(est, RANGES))
        wrong.append(range_variances(est.replace(spec=spec2), RANGES))
    spread = np.var(np.array(answers), axis=0, ddof=1)
    low, _ = variance_ratio_bounds(runs - 1, 1e-4)
    ratio = spread / np.mean(wrong, axis=0)
    assert np.all(ratio < low), ratio


def test_triple_term_closed_form() -> None:
    # u = e_{x-1} + e_{x+1}: h(x-1) + h(x+1) ~ 2 h(x) ties the three hashes; in the
    # continuous limit P[h(x-1) = h(x) = h(x+1)] = 1/(2g), so X(x) = 2 (1/(2g) - 1/g^2)
    d, x = 16, 8
    for g in (4, 8, 56):
        u = np.zeros((d, 1))
        u[[x - 1, x + 1], 0] = 1.0
        got = triple_excess(u, g, np.arange(d, dtype=np.uint64))[x, 0]
        want = 2.0 * (1.0 / (2.0 * g) - 1.0 / g**2)
        # Monte Carlo over 2^14 stratified functions: an indicator's mean, s.e. <= 0.5/128
        assert abs(got - want) < 6 * np.sqrt(want / 2 / 2**14) + 1e-3, (g, got, want)
        # mixed keys scatter the progression: the excess is at noise level
        mixed = triple_excess(u, g, mix_item_keys(np.arange(d)))[x, 0]
        assert abs(mixed) < 0.1 * want, (g, mixed)


def test_triple_term_matches_independent_functions() -> None:
    # the fixed stratified set against fresh random seeds of the public family (BLH: g = 2)
    from ldpkit.frequency.hashing import local_hash

    d, g = 12, 2
    u = np.zeros((d, 2))
    u[2:9, 0] = 1.0
    u[[1, 4, 7, 10], 1] = [1.0, -2.0, 0.5, 1.0]
    got = triple_excess(u, g, np.arange(d, dtype=np.uint64))
    seeds = np.random.default_rng(5).integers(0, 2**63, size=100_000, dtype=np.uint64)
    h = local_hash(seeds[:, None], np.arange(d)[None, :], g)  # (seeds, items)
    same = (h[:, :, None] == h[:, None, :]).astype(np.float64)  # [h(x) = h(w)]
    for i in range(2):
        col = u[:, i]
        n1 = same @ col - col  # other items' weight in x's bucket
        n2 = same @ (col * col) - col * col
        sims = n1 * n1 - n2
        sq = col * col
        ideal = ((col.sum() - col) ** 2 - (sq.sum() - sq)) / g**2
        want = sims.mean(axis=0) - ideal
        se = sims.std(axis=0) / np.sqrt(seeds.size)
        assert np.all(np.abs(got[:, i] - want) < 6 * se + 1e-3), (got[:, i], want, se)
    assert excess_functions(64, 64) == 2**14 and excess_functions(1024, 1024) == 0


def test_blh_range_sum() -> None:
    runs = 400
    spec = BLH(epsilon=2.0, domain_size=D)
    spread, _, exact = spread_and_reports(spec, beta_bins(), runs)
    low, high = variance_ratio_bounds(runs - 1, 1e-4)
    ratio = spread / exact
    assert np.all((low <= ratio) & (ratio <= high)), ratio


def test_cfo_binning_olh_range_interval() -> None:
    # CFOBinning's OLH (plain items): Distribution.range_interval's variance, users redrawn
    runs = 400
    spec = CFOBinning(epsilon=2.0, buckets=D)
    assert spec.frequency_oracle.name == "OLH"
    a, b = np.array([0.5, 0.625]), np.array([1.0, 0.75])
    answers, reported = [], []
    w = None
    for run in range(runs):
        gen = np.random.default_rng(100 + run)
        dist = spec.run(gen.beta(5.0, 2.0, size=N), rng=gen)
        answers.append(dist.range(a, b))
        if w is None:
            w = dist._cdf_weights(b) - dist._cdf_weights(a)
        reported.append(dist._moments(w)[1] ** 2)
    spread = np.var(np.array(answers), axis=0, ddof=1)
    low, high = variance_ratio_bounds(runs - 1, 1e-4)
    ratio = spread / np.mean(reported, axis=0)
    assert np.all((low <= ratio) & (ratio <= high)), ratio


def test_other_oracles_and_errors() -> None:
    values = beta_bins(n=400, d=8) % 8
    grr = GRR(epsilon=2.0, domain_size=8).run(values, rng=0)
    # one item reported: the whole domain's sum is a constant
    assert range_variances(grr, [[0, 8]])[0] < 1e-12
    oue = OUE(epsilon=1.0, domain_size=8).run(values, rng=0)
    f = np.clip(oue.frequencies, 0, None)
    f /= f.sum()
    spec = oue.spec
    per_item = spec.variance(oue.n, f)
    np.testing.assert_allclose(set_variances(oue, [[1, 3, 5]]), per_item[[1, 3, 5]].sum())
    members = np.zeros((1, 8), dtype=bool)
    members[0, [1, 3, 5]] = True
    np.testing.assert_allclose(set_variances(oue, members), set_variances(oue, [[1, 3, 5]]))
    assert set_answers(oue, members).shape == (1,)
    with pytest.raises(TypeError, match="estimate must be a FrequencyEstimate"):
        range_variances(oue.frequencies, [[0, 2]])
    hr = HadamardResponse(epsilon=1.0, domain_size=8).run(values, rng=0)
    with pytest.raises(ValueError, match="estimate must come from an oracle"):
        range_variances(hr, [[0, 2]])
    with pytest.raises(ValueError, match="ranges must satisfy"):
        range_variances(oue, [[3, 2]])
    with pytest.warns(IntervalWarning, match="post-processing"):
        assert np.isnan(range_variances(norm_sub(oue), [[0, 2]])).all()


def test_kernel_matches_numpy_twin() -> None:
    from ldpkit.frequency._hash_moments import _functions, _kernel, _triple_sums_numpy

    gen = np.random.default_rng(0)
    a, b = _functions(2048)
    # counting sort (g small against d) and argsort (g large) paths; plain and mixed keys
    for d, m, g in ((12, 3, 2), (30, 2, 8), (20, 4, 1000)):
        u = gen.normal(size=(d, m))
        for keys in (np.arange(d, dtype=np.uint64), mix_item_keys(np.arange(d))):
            got = _kernel()(a, b, keys, g, u)
            want = _triple_sums_numpy(u, g, keys, 2048)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9 * np.abs(want).max())


def test_group_mean_share_variance_has_the_pair_covariance() -> None:
    # GroupMean's OLH (plain items 2c, 2c + 1): the share f0 + f1 is a range of two items
    from ldpkit.multidim import GroupMean

    gen = np.random.default_rng(7)
    groups = gen.choice(6, size=3000, p=[0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    rows = np.stack([groups, gen.random(3000)], axis=1)
    spec = GroupMean(epsilon=2.0, domain_size=6, low=0.0, high=1.0, oracle="olh")
    stats = spec.aggregate(spec.randomize(rows, rng=0))
    got = spec.estimate(stats)
    inner = spec.inner()
    assert not inner.mix_items  # stored GroupMean specs keep their reports' meaning
    est = inner.estimate(Stats(inner, stats.n, **stats.arrays))
    pairs = np.stack([np.arange(0, 12, 2), np.arange(2, 14, 2)], axis=1)
    want = range_variances(est, pairs)
    summed = est.variance.reshape(-1, 2).sum(axis=1)
    assert np.all(want > summed * 1.02)  # the triple term is there, and positive
    np.testing.assert_allclose(got.share_variance, want, rtol=0.03)
