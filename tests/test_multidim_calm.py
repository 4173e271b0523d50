"""CALM (CCS 2018) and the full-domain baseline: unbiased consistent marginals, error bars."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import Stats
from ldpkit.multidim import CALM, Fourier, FullDomain, MarginalsEstimate, MarginalTable

SIZES = (3, 5, 2, 4)
PAIRS = [(0, 1), (1, 3), (2, 0), (3, 2)]


def population(n: int, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed)
    a = gen.choice(3, size=n, p=[0.6, 0.3, 0.1])
    b = (a + gen.choice(5, size=n, p=[0.5, 0.2, 0.15, 0.1, 0.05])) % 5
    c = (gen.random(n) < 0.2 + 0.2 * (a == 0)).astype(np.int64)
    e = (b + gen.integers(0, 2, n)) % 4
    return np.stack([a, b, c, e], axis=1)


def truth(x: np.ndarray, attrs: tuple[int, ...]) -> np.ndarray:
    bins = [np.arange(SIZES[a] + 1) for a in attrs]
    return np.histogramdd(x[:, list(attrs)], bins=bins)[0] / x.shape[0]


def max_z(est: MarginalsEstimate, x: np.ndarray) -> float:
    out = 0.0
    for attrs in [*PAIRS, (1,), (2,)]:
        m = est.marginal(attrs)
        z = (m.table - truth(x, attrs)) / m.std_error
        out = max(out, float(np.abs(z).max()))
    return out


SPECS = [
    lambda eps: CALM(epsilon=eps, domain_sizes=SIZES, oracle="grr"),
    lambda eps: CALM(epsilon=eps, domain_sizes=SIZES),
    lambda eps: FullDomain(epsilon=eps, domain_sizes=SIZES),
    lambda eps: Fourier(epsilon=eps, domain_sizes=SIZES),
]
IDS = ["CALM-grr", "CALM-olh", "FullDomain-hr", "Fourier"]


@pytest.mark.parametrize("make", SPECS, ids=IDS)
def test_marginals_unbiased_z(make):
    x = population(100_000)
    spec = make(1.0)
    assert max_z(spec.run(x, rng=1), x) <= 5.0


@pytest.mark.parametrize("make", SPECS, ids=IDS)
def test_marginals_z_fails_for_a_wrong_epsilon(make):
    x = population(100_000)
    spec, other = make(1.0), make(2.0)
    stats = spec.aggregate(spec.randomize(x, rng=1))
    assert max_z(other.estimate(Stats(other, stats.n, **stats.arrays)), x) > 6.0


@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_calm_consistency(oracle):
    spec = CALM(epsilon=1.0, domain_sizes=SIZES, oracle=oracle, ell=2)  # 2-way tables
    est = spec.run(population(20_000), rng=0)
    for t in est.tables:
        assert abs(t.table.sum() - 1.0) < 1e-12
    for a in range(len(SIZES)):
        views = [
            t.table.sum(axis=1 - t.attributes.index(a)) for t in est.tables if a in t.attributes
        ]
        for v in views[1:]:
            np.testing.assert_allclose(v, views[0], rtol=0, atol=1e-12)
    # the consistent tables beat the plain ones (the averaging removes noise)
    x = population(20_000)
    plain = spec.plain_tables(spec.aggregate(spec.randomize(x, rng=0)))
    cons = spec.run(x, rng=0)
    err_plain = sum(float(((t.table - truth(x, t.attributes)) ** 2).sum()) for t in plain)
    err_cons = sum(float(((t.table - truth(x, t.attributes)) ** 2).sum()) for t in cons.tables)
    assert err_cons < err_plain


def test_calm_error_bars_match_the_spread_and_cover():
    # 150 repetitions: the consistent cells' spread against their reported variance, and
    # the coverage of the 95% intervals (the variance of the consistency map, not the plain
    # one, which is ~35% too large here and covers ~98%)
    n, reps = 4000, 150
    x = population(n, seed=2)
    spec = CALM(epsilon=2.0, domain_sizes=SIZES, oracle="grr")
    gen = np.random.default_rng(5)
    errs, var, hits = [], [], []
    for _ in range(reps):
        est = spec.run(x, rng=gen)
        e, v, h = [], [], []
        for attrs in PAIRS:
            m = est.marginal(attrs)
            t = truth(x, attrs)
            lo, hi = m.confidence_interval(0.05)
            e.append((m.table - t).ravel())
            v.append(m.variance.ravel())
            h.append(((lo <= t) & (t <= hi)).ravel())
        errs.append(np.concatenate(e))
        var.append(np.concatenate(v))
        hits.append(np.concatenate(h))
    ratio = float((np.square(errs).mean(axis=0) / np.mean(var, axis=0)).mean())
    assert 0.85 <= ratio <= 1.15, ratio
    assert 0.93 <= float(np.mean(hits)) <= 0.97


def test_marginal_answers_and_frames():
    spec = CALM(epsilon=1.0, domain_sizes=SIZES, oracle="grr")
    est = spec.run(population(20_000), rng=0)
    ab, ba = est.marginal((0, 1)), est.marginal((1, 0))
    np.testing.assert_array_equal(ab.table, ba.table.T)
    np.testing.assert_array_equal(ab.variance, ba.variance.T)
    one = est.marginal((2,))
    assert one.table.shape == (2,) and abs(one.table.sum() - 1) < 1e-12
    three = est.marginal((0, 1, 2))  # in no collected marginal: max-entropy reconstruction
    assert three.method == "max_entropy" and three.table.shape == (3, 5, 2)
    assert abs(three.table.sum() - 1) < 1e-9 and ab.method == "collected"
    with pytest.raises(ValueError, match="attributes must be"):
        est.marginal((0, 0))
    with pytest.raises(ValueError, match="attributes must be"):
        est.marginal((0, 9))
    with pytest.raises(TypeError, match="attributes must be"):
        est.marginal("ab")
    frame = ab.to_frame(0.1)
    assert list(frame.columns) == [
        "attribute_0",
        "attribute_1",
        "estimate",
        "std_error",
        "low",
        "high",
    ]
    assert len(frame) == 15 and (frame["low"] < frame["estimate"]).all()
    assert len(est.to_frame()) == sum(t.table.size for t in est.tables)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = ab.plot()
    assert ax.get_xlabel() == "attribute 1"
    plt.close("all")
    with pytest.raises(ValueError, match="plot needs a 2-way marginal"):
        one.plot()
    assert isinstance(ab, MarginalTable)


def test_full_domain_marginal_is_the_sum_of_cells():
    spec = FullDomain(epsilon=2.0, domain_sizes=(3, 4))
    est = spec.run(population(5000)[:, :2] % [3, 4], rng=0)
    (table,) = est.tables
    m = est.marginal((1,))
    np.testing.assert_allclose(m.table, table.table.sum(axis=0), rtol=0, atol=1e-15)
    # plus the Hadamard-response cells' covariances (exact: tests/test_multidim_fullvar.py)
    from ldpkit.multidim.calm import _hr_sum_covariance

    cov = _hr_sum_covariance(table.table, (3, 4), (1,), 1.0 / (5000 * (2 * spec.inner().p - 1)))
    assert np.all(cov > 0)
    np.testing.assert_allclose(m.variance, table.variance.sum(axis=0) + cov, rtol=1e-12)


def test_validation():
    with pytest.raises(ValueError, match="way must be"):
        CALM(epsilon=1.0, domain_sizes=(3, 4), way=1)
    with pytest.raises(ValueError, match="way must be"):
        CALM(epsilon=1.0, domain_sizes=(3, 4), way=3)
    with pytest.raises(ValueError, match="oracle must be 'olh' or 'grr'"):
        CALM(epsilon=1.0, domain_sizes=(3, 4), oracle="oue")
    with pytest.raises(ValueError, match="oracle must be 'hr' or 'olh'"):
        FullDomain(epsilon=1.0, domain_sizes=(3, 4), oracle="grr")
    with pytest.raises(ValueError, match="domain_sizes must have a product"):
        FullDomain(epsilon=1.0, domain_sizes=(4096, 4096, 2))
    spec = CALM(epsilon=1.0, domain_sizes=(3, 4, 2), ell=2)
    lonely = Stats(spec, 1, counts=np.zeros(12 + 6 + 8, dtype=np.int64), sizes=[1, 0, 0])
    with pytest.raises(ValueError, match="at least one report of every marginal"):
        spec.estimate(lonely)
    with pytest.raises(ValueError, match="n must be"):
        spec.variance(0)


def test_fourier_error_bars_cover():
    spec = Fourier(epsilon=2.0, domain_sizes=SIZES)
    n, reps = 4000, 100
    x = population(n, seed=2)
    gen = np.random.default_rng(4)
    hits = []
    for _ in range(reps):
        est = spec.run(x, rng=gen)
        for attrs in PAIRS:
            m = est.marginal(attrs)
            t = truth(x, attrs)
            lo, hi = m.confidence_interval(0.05)
            hits.append(((lo <= t) & (t <= hi)).ravel())
    assert 0.93 <= float(np.mean(np.concatenate(hits))) <= 0.97


def test_fourier_bit_sets_and_validation():
    spec = Fourier(epsilon=1.0, domain_sizes=(3, 4, 2))
    # bits: 2 + 2 + 1; pairs (0,1): 15 sets, (0,2): 7, (1,2): 7; the sets inside one
    # attribute's bits (3, 3 and 1) are shared by two pairs and counted once
    assert spec.coefficient_masks.size == 15 + 7 + 7 - 3 - 3 - 1
    assert abs(spec.privacy_loss() - 1.0) < 1e-12
    with pytest.raises(ValueError, match="domain_sizes must fit in 62 bits"):
        Fourier(epsilon=1.0, domain_sizes=(64,) * 11)
    with pytest.raises(ValueError, match="way must be"):
        Fourier(epsilon=1.0, domain_sizes=(3, 4), way=3)
