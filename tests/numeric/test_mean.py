"""SR, PM, HM: closed forms, sampler laws, unbiasedness, variances, privacy, variance protocol."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from scipy import integrate, stats

from ldpkit import Reports, Stats
from ldpkit.numeric import (
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
    estimate_variance,
    hybrid_variance,
    hybrid_worst_case_variance,
    piecewise_variance,
    stochastic_rounding_variance,
)
from ldpkit.testing import binomial_z, bonferroni_z

ALPHA = 1e-6
MECHS = [StochasticRounding, PiecewiseMechanism, HybridMechanism]


# -- independent references (SW20 section 2.2, Wang et al. ICDE 2019, METHODS.md 5) -----------
def pm_parts(t, eps):
    e2 = math.exp(eps / 2)
    s = (e2 + 1) / (e2 - 1)
    lo = (e2 * t - 1) / (e2 - 1)
    hi = (e2 * t + 1) / (e2 - 1)
    p = e2 / 2 * (e2 - 1) / (e2 + 1)
    q = 1 / (2 * e2) * (e2 - 1) / (e2 + 1)
    return s, lo, hi, p, q


def pm_cdf(y, t, eps):
    s, lo, hi, p, q = pm_parts(t, eps)
    y = np.clip(np.asarray(y, dtype=float), -s, s)
    return np.where(
        y < lo,
        q * (y + s),
        np.where(y <= hi, q * (lo + s) + p * (y - lo), q * (lo + s) + p * (hi - lo) + q * (y - hi)),
    )


def pm_moments_by_quadrature(t, eps):
    s, lo, hi, p, q = pm_parts(t, eps)

    def dens(y):
        return p if lo <= y <= hi else q

    m1 = integrate.quad(lambda y: y * dens(y), -s, s, points=[lo, hi], epsabs=1e-13)[0]
    m2 = integrate.quad(lambda y: y * y * dens(y), -s, s, points=[lo, hi], epsabs=1e-13)[0]
    return m1, m2 - m1 * m1


def unit(reports, spec):
    return (reports.values - spec.low) / ((spec.high - spec.low) / 2) - 1.0


# -- closed forms -----------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.3, 0.5, 1.0, 2.0, 4.0])
def test_worst_case_variances(eps):
    e, e2 = math.exp(eps), math.exp(eps / 2)
    c2 = ((e + 1) / (e - 1)) ** 2
    assert stochastic_rounding_variance(eps) == pytest.approx(c2, rel=1e-12)
    assert piecewise_variance(eps) == pytest.approx(
        1 / (e2 - 1) + (e2 + 3) / (3 * (e2 - 1) ** 2), rel=1e-12
    )
    want = c2 if eps <= 0.61 else (c2 + (e2 + 3) / (3 * (e2 - 1))) / e2  # METHODS.md section 5
    assert hybrid_worst_case_variance(eps) == pytest.approx(want, rel=1e-12)
    assert hybrid_variance(eps) == pytest.approx(want, rel=1e-12)
    t = np.linspace(-1, 1, 21)
    hv = hybrid_variance(eps, t)
    assert np.all(hv <= want * (1 + 1e-12))
    if eps > 0.61:  # HM's variance does not depend on t
        np.testing.assert_allclose(hv, want, rtol=1e-12)
    # the worst case is the max over [-1, 1]
    assert stochastic_rounding_variance(eps, t).max() == pytest.approx(
        stochastic_rounding_variance(eps)
    )
    assert piecewise_variance(eps, t).max() == pytest.approx(piecewise_variance(eps))


def test_hybrid_beats_both_above_threshold():
    for eps in (0.7, 1.0, 2.0, 4.0):
        hv = hybrid_worst_case_variance(eps)
        assert hv < stochastic_rounding_variance(eps) and hv < piecewise_variance(eps)


@pytest.mark.parametrize("eps", [0.5, 2.0, 4.0])
@pytest.mark.parametrize("t", [-1.0, -0.3, 0.0, 0.7, 1.0])
def test_pm_variance_formula_by_quadrature(eps, t):
    mean, var = pm_moments_by_quadrature(t, eps)
    assert mean == pytest.approx(t, abs=1e-9)
    assert piecewise_variance(eps, t) == pytest.approx(var, rel=1e-8)


@pytest.mark.parametrize("eps", [1e-6, 0.01, 0.3, 1.0, 5.0, 30.0])
def test_privacy_loss(eps):
    # the grid laws spend epsilon up to the integer weights' rounding
    for cls in MECHS:
        loss = cls(epsilon=eps).privacy_loss()
        assert loss <= eps and loss == pytest.approx(eps, rel=1e-7)
    assert PiecewiseMechanism(epsilon=40.0).privacy_loss() == pytest.approx(40.0, rel=1e-12)
    if eps <= 5.0:  # the grid's densities approach PM's as its cells shrink
        pm = PiecewiseMechanism(epsilon=eps)
        hi, lo = pm.density_high, pm.density_low
        _, _, _, p, q = pm_parts(0.0, eps)
        assert hi == pytest.approx(p, rel=1e-4) and lo == pytest.approx(q, rel=1e-4)
        assert hi / lo == pytest.approx(math.exp(eps), rel=1e-7)


def test_hybrid_weight():
    assert HybridMechanism(epsilon=0.61).pm_probability == 0.0
    assert HybridMechanism(epsilon=2.0).pm_probability == pytest.approx(1 - math.exp(-1.0))


# -- samplers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [1.0, 3.0])
@pytest.mark.parametrize("t", [-1.0, 0.2, 1.0])
def test_pm_sampler_law(eps, t):
    pm = PiecewiseMechanism(epsilon=eps)
    y = unit(pm.randomize(np.full(100_000, t), rng=3), pm)
    p = stats.kstest(y, lambda x: pm_cdf(x, t, eps)).pvalue
    assert p > ALPHA, f"PM sampler rejected (eps={eps}, t={t}, p={p:.2e})"
    assert stats.kstest(y, lambda x: pm_cdf(x, t, 1.3 * eps)).pvalue < ALPHA


@pytest.mark.parametrize("t", [-1.0, -0.2, 0.5, 1.0])
def test_sr_sampler_law(t):
    eps = 1.0
    sr = StochasticRounding(epsilon=eps, low=-1.0, high=1.0)
    y = unit(sr.randomize(np.full(200_000, t), rng=4), sr)
    c = (math.e + 1) / (math.e - 1)
    np.testing.assert_allclose(np.abs(y), c, rtol=1e-12)
    plus = int(np.sum(y > 0))
    p_plus = 1 / (math.e + 1) + (math.e - 1) / (math.e + 1) * (1 + t) / 2  # SW20 section 2.2
    assert abs(binomial_z(plus, y.size, p_plus)) < bonferroni_z(ALPHA, 4)
    e13 = math.exp(1.3)
    wrong = 1 / (e13 + 1) + (e13 - 1) / (e13 + 1) * (1 + t) / 2
    if t != 0:
        assert abs(binomial_z(plus, y.size, wrong)) > bonferroni_z(ALPHA, 4)


def test_hybrid_uses_sr_below_threshold():
    hm = HybridMechanism(epsilon=0.5)
    y = unit(hm.randomize(np.linspace(-1, 1, 1000), rng=0), hm)
    np.testing.assert_allclose(np.abs(y), 1 / math.tanh(0.25), rtol=1e-12)


# -- unbiasedness and variance ----------------------------------------------------------------
@pytest.mark.parametrize("cls", MECHS)
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_mean_unbiased(cls, eps):
    spec = cls(epsilon=eps, low=10.0, high=30.0)
    values = 10.0 + 20.0 * np.random.default_rng(1).beta(2, 5, 200_000)
    est = spec.run(values, rng=2)
    se = math.sqrt(spec.variance_at(values.size, values))
    z = (est.mean - values.mean()) / se
    assert abs(z) < bonferroni_z(ALPHA, 9), f"{cls.__name__} eps={eps}: z={z:.2f}"
    assert est.variance == pytest.approx(100.0 * spec.unit_variance() / values.size)
    assert spec.variance_at(values.size, values) <= est.variance * (1 + 1e-12)


@pytest.mark.parametrize("cls", MECHS)
@pytest.mark.parametrize("t", [-1.0, 0.0, 0.6])
def test_per_user_variance(cls, t):
    """Mean of (y - t)^2 is unbiased for Var(t); its CLT z-score against the formula."""
    eps, n = 2.0, 200_000
    spec = cls(epsilon=eps)
    dev2 = (unit(spec.randomize(np.full(n, t), rng=5), spec) - t) ** 2
    se = dev2.std() / math.sqrt(n)
    if se < 1e-9:  # SR at t = 0: (y - t)^2 = C^2 for every report
        assert dev2.mean() == pytest.approx(spec.unit_variance(t), rel=1e-12)
        assert cls(epsilon=1.3 * eps).unit_variance(t) != pytest.approx(dev2.mean(), rel=1e-3)
        return
    z = (dev2.mean() - spec.unit_variance(t)) / se
    assert abs(z) < bonferroni_z(ALPHA, 9), f"{cls.__name__} t={t}: z={z:.2f}"
    wrong = cls(epsilon=1.3 * eps).unit_variance(t)
    assert abs((dev2.mean() - wrong) / se) > bonferroni_z(ALPHA, 9)


def test_empirical_variance_and_ci():
    sr = StochasticRounding(epsilon=1.0, low=0.0, high=4.0)
    values = np.random.default_rng(6).random(2000) * 4
    covered = 0
    rng = np.random.default_rng(7)
    for _ in range(300):
        est = sr.run(values, rng=rng)
        lo, hi = est.confidence_interval(0.05)
        covered += lo <= values.mean() <= hi
        assert est.variance_empirical <= est.variance * 1.2
    # worst-case variance: coverage at least 95% (binomial slack of 6 sd)
    assert covered / 300 >= 0.95 - 6 * math.sqrt(0.95 * 0.05 / 300)


# -- flow -------------------------------------------------------------------------------------
def test_stats_merge_and_round_trips():
    pm = PiecewiseMechanism(epsilon=1.0, low=0.0, high=5.0)
    r = pm.randomize(np.random.default_rng(8).random(10_000) * 5, rng=9)
    whole = pm.aggregate(r)
    merged = pm.aggregate(r[:3000]).merge(pm.aggregate(r[3000:]))
    assert merged.n == whole.n == 10_000
    assert float(merged.sum) == pytest.approx(float(whole.sum), rel=1e-12)
    assert float(merged.sum_squares) == pytest.approx(float(whole.sum_squares), rel=1e-12)
    assert Stats.from_dict(json.loads(json.dumps(whole.to_dict()))) == whole
    assert pickle.loads(pickle.dumps(pm)) == pm
    assert pm.estimate(merged).mean == pytest.approx(pm.estimate(whole).mean, rel=1e-12)
    assert pm.aggregate(r).merge(pm.empty_stats()) == whole


def test_validation():
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06 and <= 40"):
        PiecewiseMechanism(epsilon=800.0)
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06 and <= 30"):
        HybridMechanism(epsilon=31.0)
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06 and"):
        StochasticRounding(epsilon=1e-7)
    with pytest.raises(ValueError, match="high must be a finite number > low"):
        HybridMechanism(epsilon=1.0, low=1.0, high=0.0)
    sr = StochasticRounding(epsilon=1.0, low=0.0, high=1.0)
    with pytest.raises(ValueError, match=r"values must be real numbers in \[0, 1\]"):
        sr.randomize([0.5, 1.5], rng=0)
    with pytest.raises(ValueError, match="reports.values must be real numbers in"):
        sr.aggregate(Reports(sr, values=np.array([0.5, 50.0])))
    with pytest.raises(ValueError, match="reports must come from"):
        sr.aggregate(StochasticRounding(epsilon=2.0, low=0.0, high=1.0).randomize([0.5], rng=0))
    with pytest.raises(ValueError, match="n = 0"):
        sr.estimate(sr.empty_stats())
    one = sr.run([0.3], rng=0)
    assert one.variance_empirical == one.variance  # no sample variance: the worst-case bound


# -- variance protocol (SW20 section 6.3) ------------------------------------------------------
@pytest.mark.parametrize("cls", MECHS)
def test_estimate_variance(cls):
    spec = cls(epsilon=2.0, low=0.0, high=10.0)
    values = 10.0 * np.random.default_rng(10).beta(2, 5, 400_000)
    res = estimate_variance(spec, values, rng=11)
    assert res.first.n == 200_000 and res.second.n == 200_000
    assert res.mean == pytest.approx(res.first.mean)
    # E[estimate] = sigma^2 + E[(mu^ - mu)^2]; allow 6 standard errors plus that bias
    tol = 6 * res.second.std_error + res.first.variance + 6 * values.var() / math.sqrt(200_000)
    assert abs(res.variance - values.var()) < tol, (res.variance, values.var(), tol)
    assert 0.0 <= res.variance <= 25.0
    odd = estimate_variance(spec, values[:1001], rng=0, split=0.3)
    assert odd.first.n == 300 and odd.second.n == 701


def test_estimate_variance_validation():
    spec = HybridMechanism(epsilon=1.0)
    with pytest.raises(ValueError, match="at least 2 values"):
        estimate_variance(spec, [0.5], rng=0)
    with pytest.raises(ValueError, match="split must be"):
        estimate_variance(spec, [0.1, 0.5], rng=0, split=1.0)
    with pytest.raises(TypeError, match="spec must be"):
        estimate_variance(SquareWave(epsilon=1.0), [0.1, 0.5], rng=0)
