"""FullDomain's marginal error bars: the exact variance of a sum of product-domain cells."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import Stats
from ldpkit.frequency.hadamard import HadamardResponse, hadamard_sign
from ldpkit.multidim import FullDomain
from ldpkit.multidim import calm as calm_module
from ldpkit.multidim.calm import _hr_sum_covariance

SIZES = (2, 2, 2, 2, 2)
MARGINALS = [(0,), (1, 0)]
N, RUNS = 4000, 2000


def skewed(seed: int = 5) -> np.ndarray:
    """A skewed distribution over the 32 cells (the covariances matter for it)."""
    return np.random.default_rng(seed).dirichlet(np.full(math.prod(SIZES), 0.3))


def population(f: np.ndarray, n: int) -> np.ndarray:
    counts = np.round(f * n).astype(np.int64)
    counts[0] += n - counts.sum()
    return np.array(np.unravel_index(np.repeat(np.arange(f.size), counts), SIZES)).T


def truth(x: np.ndarray, attrs: tuple[int, ...]) -> np.ndarray:
    bins = [np.arange(SIZES[a] + 1) for a in attrs]
    return np.histogramdd(x[:, list(attrs)], bins=bins)[0] / x.shape[0]


def summing(sizes: tuple[int, ...], attrs: tuple[int, ...]) -> np.ndarray:
    """The 0/1 matrix that sums product-domain cells into the marginal's cells."""
    shape = tuple(sizes[a] for a in attrs)
    idx = np.indices(sizes).reshape(len(sizes), -1)
    owner = np.ravel_multi_index(tuple(idx[a] for a in attrs), shape)
    out = np.zeros((math.prod(shape), owner.size))
    out[owner, np.arange(owner.size)] = 1.0
    return out


@pytest.mark.parametrize("sizes", [(3, 4), (2, 2, 2), (5, 3)])
def test_hr_covariance_matches_the_transition_matrix_exactly(sizes: tuple[int, ...]) -> None:
    # the estimator's exact covariance from P[y | x]: each user adds
    # Z_v(y) = (1[y in C_v] - 1/2) / (p - 1/2), divided by n
    d = math.prod(sizes)
    hr = HadamardResponse(epsilon=1.3, domain_size=d)
    prob = hr.transition_matrix()
    k = prob.shape[1]
    support = hadamard_sign(np.arange(1, d + 1)[:, None], np.arange(k)[None, :]) > 0
    z = (support - 0.5) / (hr.p - 0.5)
    f = np.random.default_rng(1).dirichlet(np.ones(d))
    n = 1000
    cov = np.zeros((d, d))
    for x in range(d):
        mean = z @ prob[x]
        cov += f[x] * ((z * prob[x]) @ z.T - np.outer(mean, mean))
    cov /= n
    for attrs in [(0,), (len(sizes) - 1, 0), tuple(range(len(sizes)))]:
        a = summing(sizes, attrs)
        exact = np.einsum("cu,uv,cv->c", a, cov, a)
        plain = a @ np.diag(cov)
        cov_part = _hr_sum_covariance(f.reshape(sizes), sizes, attrs, 1 / (n * (2 * hr.p - 1)))
        np.testing.assert_allclose(plain + cov_part.ravel(), exact, rtol=1e-9)
        if len(attrs) < len(sizes):  # the summed variances alone miss the covariances
            assert np.max(np.abs(plain - exact) / exact) > 0.01


def test_hr_covariance_left_out_beyond_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    f = skewed()
    assert np.all(_hr_sum_covariance(f.reshape(SIZES), SIZES, (0,), 1e-3) > 0)
    monkeypatch.setattr(calm_module, "MAX_HR_COVARIANCE_ENTRIES", 8)
    np.testing.assert_array_equal(_hr_sum_covariance(f.reshape(SIZES), SIZES, (0,), 1e-3), 0)


def runs(spec: FullDomain, x: np.ndarray, wrong: FullDomain | None = None) -> dict:
    """Estimates and reported variances of the MARGINALS over RUNS seeded runs."""
    out: dict = {a: ([], []) for a in MARGINALS}
    for seed in range(RUNS):
        stats = spec.aggregate(spec.randomize(x, rng=seed))
        est = (
            spec.estimate(stats)
            if wrong is None
            else wrong.estimate(Stats(wrong, stats.n, **stats.arrays))
        )
        for attrs in MARGINALS:
            m = est.marginal(attrs)
            out[attrs][0].append(m.table.ravel())
            out[attrs][1].append(m.variance.ravel())
    return {a: (np.array(t), np.array(v)) for a, (t, v) in out.items()}


@pytest.fixture(scope="module")
def hr_runs() -> tuple[np.ndarray, dict]:
    x = population(skewed(), N)
    return x, runs(FullDomain(epsilon=3.0, domain_sizes=SIZES), x)


def test_hr_variance_matches_the_spread_of_repeated_runs(hr_runs: tuple) -> None:
    x, res = hr_runs
    spec = FullDomain(epsilon=3.0, domain_sizes=SIZES)
    inner = spec.inner()
    f = truth(x, tuple(range(len(SIZES)))).ravel()
    cell_var = np.array([inner.variance(N, fi) for fi in f]).reshape(SIZES)
    for attrs, (tables, variances) in res.items():
        spread = tables.var(axis=0, ddof=1)
        a = summing(SIZES, attrs)
        plain = a @ cell_var.ravel()
        cov = _hr_sum_covariance(f.reshape(SIZES), SIZES, attrs, 1 / (N * (2 * inner.p - 1)))
        exact = plain + cov.ravel()
        # RUNS = 2000: the spread's relative sd is sqrt(2 / 2000) = 3 %
        assert np.all(np.abs(spread / exact - 1) < 0.10), (attrs, spread / exact)
        assert np.all(np.abs(variances.mean(axis=0) / exact - 1) < 0.10)
        # the summed cell variances alone (the covariances dropped) miss by more
        assert np.all(np.abs(spread / plain - 1) > 0.10), (attrs, spread / plain)


def test_hr_marginal_z_and_coverage(hr_runs: tuple) -> None:
    x, res = hr_runs
    cover = {0.7: [], 1.0: [], 1.4: []}
    for attrs, (tables, variances) in res.items():
        t = truth(x, attrs).ravel()
        z = (tables.mean(axis=0) - t) / np.sqrt(variances.mean(axis=0) / RUNS)
        assert np.all(np.abs(z) < 5), z
        for width in cover:
            cover[width].append(np.abs(tables - t) <= width * 1.959964 * np.sqrt(variances))
    rate = {w: float(np.mean(np.concatenate([c.ravel() for c in v]))) for w, v in cover.items()}
    assert 0.92 <= rate[1.0] <= 0.98, rate
    assert not 0.92 <= rate[0.7] <= 0.98, rate
    assert not 0.92 <= rate[1.4] <= 0.98, rate


def test_hr_marginal_z_fails_at_a_wrong_epsilon() -> None:
    x = population(skewed(), N)
    res = runs(
        FullDomain(epsilon=3.0, domain_sizes=SIZES),
        x,
        wrong=FullDomain(epsilon=2.5, domain_sizes=SIZES),
    )
    worst = 0.0
    for attrs, (tables, variances) in res.items():
        z = (tables.mean(axis=0) - truth(x, attrs).ravel()) / np.sqrt(variances.mean(axis=0) / RUNS)
        worst = max(worst, float(np.abs(z).max()))
    assert worst > 6, worst


def test_estimates_unchanged_and_full_table_variance_is_the_cells() -> None:
    x = population(skewed(), N)
    spec = FullDomain(epsilon=1.0, domain_sizes=SIZES)
    est = spec.run(x, rng=3)
    full = est.tables[0]
    m = est.marginal((0, 2))
    np.testing.assert_array_equal(m.table, full.table.sum(axis=(1, 3, 4)))
    whole = est.marginal(tuple(range(len(SIZES))))
    np.testing.assert_array_equal(whole.table, full.table)
    np.testing.assert_allclose(whole.variance, full.variance, rtol=1e-12)
