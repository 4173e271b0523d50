"""Wiener deconvolution (Fang et al. 2023): convolution model, noise power, exactness on
noiseless input, MSE gain over the naive estimate, the spec's flow and validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ldpkit import GRR, OUE, Reports, Stats
from ldpkit.consistency import simplex_projection
from ldpkit.numeric import Distribution, WienerDeconvolution
from ldpkit.numeric.deconvolution import noise_power, wiener_deconvolve


def circular(h: np.ndarray, f: np.ndarray) -> np.ndarray:
    d = f.size
    return np.array([sum(h[(i - k) % d] * f[k] for k in range(d)) for i in range(d)])


def smooth_truth(d: int) -> np.ndarray:
    edges = np.linspace(0, 1, d + 1)
    return np.diff(sps.beta(5, 2).cdf(edges))


@pytest.mark.parametrize("oracle", ["grr", "oue"])
def test_expected_observation_is_a_circular_convolution(oracle):
    wd = WienerDeconvolution(epsilon=1.0, buckets=16, oracle=oracle)
    o = wd.oracle_spec
    f = smooth_truth(16)
    h = np.full(16, o.q)
    h[0] = o.p
    np.testing.assert_allclose(circular(h, f), o.q + (o.p - o.q) * f, rtol=1e-12)


def test_oracle_choice_and_privacy():
    # d < 3 e^eps + 2 -> GRR (FO17 section 5), else OUE
    assert WienerDeconvolution(epsilon=2.0, buckets=16).oracle_spec.name == "GRR"  # 16 < 24.2
    assert WienerDeconvolution(epsilon=2.0, buckets=32).oracle_spec.name == "OUE"
    assert WienerDeconvolution(epsilon=2.0, buckets=32, oracle="grr").oracle_spec.name == "GRR"
    for bins, eps in ((8, 1.0), (32, 0.5)):
        o = WienerDeconvolution(epsilon=eps, buckets=bins).oracle_spec
        assert o.privacy_loss() == pytest.approx(eps, abs=1e-9)


@pytest.mark.parametrize("method", ["direct", "iterative"])
@pytest.mark.parametrize(
    ("p", "q"), [(0.5, 1 / (math.e + 1)), (math.e / (math.e + 31), 1 / (math.e + 31))]
)
def test_noiseless_input_is_returned_exactly(method, p, q):
    f = smooth_truth(32)
    y = q + (p - q) * f
    out, info = wiener_deconvolve(y, p, q, 0.0, method=method)
    np.testing.assert_allclose(out, f, atol=1e-12)
    assert info.converged and info.method == method
    # negligible noise power: still (almost) the input
    out, _ = wiener_deconvolve(y, p, q, 1e-14, method=method)
    np.testing.assert_allclose(out, f, atol=1e-6)


def test_noise_power_matches_simulation():
    """E|N(w)|^2 of the observed OUE frequencies (independent bits) at every w != 0 equals
    the formula; the mean of R (d/2 - 1) near-exponential terms is within 6 standard
    errors (~7%); a noise power off by 30% is rejected."""
    wd = WienerDeconvolution(epsilon=1.0, buckets=32, oracle="oue")
    o = wd.oracle_spec
    n, reps = 3000, 400
    values = np.random.default_rng(0).beta(5, 2, n)
    f = Distribution.from_values(values, 0, 1, 32).probabilities
    expected = o.q + (o.p - o.q) * f
    many = wd.randomize(np.tile(values, reps), rng=1)
    powers = []
    for r in range(reps):
        s = wd.aggregate(many[r * n : (r + 1) * n])
        spec = np.fft.rfft(s.counts / n - expected)
        powers.append(np.abs(spec[1:16]) ** 2)
    mean = float(np.mean(powers))
    pn = wd.noise_power(n)
    assert pn == noise_power(o.p, o.q, 32, n)
    se = float(np.std(powers)) / math.sqrt(np.size(powers))
    assert abs(mean - pn) <= 6 * se
    assert abs(mean - 1.3 * pn) > 6 * se


def test_wiener_improves_mse_over_naive_on_smooth_data():
    """Beta(5,2) at eps = 1, d = 64, n = 1e5, averaged over 6 runs.

    The naive estimate's MSE matches its closed form ``P_n / (p-q)^2`` (so the baseline is
    right). A Wiener filter with the *true* power spectrum would reach
    ``sum_w N' P_f / (P_f + N') / d`` (N' = P_n / (p-q)^2), 0.13 of the naive MSE here,
    because a smooth density's power sits in a few low frequencies; DW and IIW estimate
    P_f from the data and measured 0.42 and 0.28 of the naive MSE (run-to-run spread of
    the ratio 0.04). We require < 0.6, which a filter that did not shrink the noise
    (ratio ~1) cannot meet, and no better than the oracle (x 0.8)."""
    d, n, eps = 64, 100_000, 1.0
    wd = WienerDeconvolution(epsilon=eps, buckets=d)
    o = wd.oracle_spec
    rng = np.random.default_rng(10)
    mse = {"naive": [], "direct": [], "iterative": []}
    truth_f = []
    for r in range(6):
        values = rng.beta(5, 2, n)
        truth = Distribution.from_values(values, 0, 1, d).probabilities
        truth_f.append(truth)
        s = wd.aggregate(wd.randomize(values, rng=100 + r))
        mse["naive"].append(np.sum((wd.naive_estimate(s) - truth) ** 2))
        for method in ("direct", "iterative"):
            _, info = wd.estimate(s, method, return_info=True)
            mse[method].append(np.sum((info.raw - truth) ** 2))
    naive = float(np.mean(mse["naive"]))
    closed = wd.noise_power(n) / (o.p - o.q) ** 2 * (d - 1) / d  # DC carries no noise
    assert naive == pytest.approx(closed, rel=0.25)
    n_prime = wd.noise_power(n) / (o.p - o.q) ** 2
    power = np.abs(np.fft.fft(np.mean(truth_f, axis=0))) ** 2
    oracle = float(np.sum((n_prime * power / (power + n_prime))[1:]) / d)
    for method in ("direct", "iterative"):
        ratio = float(np.mean(mse[method])) / naive
        assert ratio < 0.6, (method, ratio)
        assert float(np.mean(mse[method])) > 0.8 * oracle


def test_iterative_reaches_power_subtraction_fixed_point():
    """IIW's fixed point: the Wiener filter with P_f = max(|F~|^2 - N / |H|^2, 0)."""
    rng = np.random.default_rng(3)
    d, p, q, noise = 32, 0.5, 0.2, 2e-4
    y = q + (p - q) * smooth_truth(d) + rng.normal(0, math.sqrt(noise / d), d)
    f, _ = wiener_deconvolve(y, p, q, noise, method="iterative", max_iter=20_000, tol=1e-13)
    h = np.full(d, q)
    h[0] = p
    hh = np.fft.rfft(h)
    yy = np.fft.rfft(y)
    naive = yy / hh
    pf = np.maximum(np.abs(naive) ** 2 - noise / np.abs(hh) ** 2, 0.0)
    spectrum = np.conj(hh) * pf / (np.abs(hh) ** 2 * pf + noise) * yy
    spectrum[0] = 1.0
    expected = np.fft.irfft(spectrum, n=d)
    np.testing.assert_allclose(f, expected, atol=2e-4)
    assert f.sum() == pytest.approx(1.0, abs=1e-12)


def test_spec_flow_merge_and_distribution():
    wd = WienerDeconvolution(epsilon=2.0, buckets=20, low=-5.0, high=5.0)
    values = np.random.default_rng(0).normal(0, 1.5, 20_000).clip(-5, 5)
    rep = wd.randomize(values, rng=1)
    assert rep.fields == ("values",) and len(rep) == 20_000  # GRR at d = 20 < 24.2
    a, b = rep[:7000], rep[7000:]
    merged = wd.aggregate(a).merge(wd.aggregate(b))
    assert merged == wd.aggregate(rep)
    assert Stats.from_dict(merged.to_dict()) == merged
    for method in ("direct", "iterative"):
        plain = wd.estimate(merged, method)
        assert plain.postprocessing == () and plain.n == 20_000 and plain.spec == wd
        dist = wd.estimate(merged, method, postprocess="norm_sub")
        np.testing.assert_allclose(dist.probabilities, simplex_projection(plain.probabilities))
        assert isinstance(dist, Distribution) and dist.buckets == 20
        assert dist.low == -5.0 and dist.high == 5.0
        assert np.all(dist.probabilities >= 0) and dist.postprocessing == ("norm_sub",)
        assert dist.probabilities.sum() == pytest.approx(1.0, abs=1e-12)
        assert abs(dist.mean() - values.mean()) < 0.2
    assert wd.randomize(values, rng=1).equals(rep)
    oue = WienerDeconvolution(epsilon=0.5, buckets=64)
    assert oue.randomize([0.5], rng=0).fields == ("bits",)


def test_validation():
    with pytest.raises(ValueError, match="buckets must be an integer >= 2"):
        WienerDeconvolution(epsilon=1.0, buckets=1)
    with pytest.raises(ValueError, match="oracle must be one of"):
        WienerDeconvolution(epsilon=1.0, oracle="olh")
    with pytest.raises(ValueError, match="epsilon must be"):
        WienerDeconvolution(epsilon=float("nan"))
    wd = WienerDeconvolution(epsilon=1.0, buckets=8)
    with pytest.raises(ValueError, match=r"values must be real numbers in \[0, 1\]"):
        wd.randomize([1.5])
    s = wd.aggregate(wd.randomize(np.linspace(0, 1, 100), rng=0))
    with pytest.raises(ValueError, match="method must be one of"):
        wd.estimate(s, "lucy")
    with pytest.raises(ValueError, match="stats must summarize at least one report"):
        wd.estimate(wd.empty_stats())
    with pytest.raises(ValueError, match="reports must come from"):
        WienerDeconvolution(epsilon=1.0, buckets=9).aggregate(wd.randomize([0.1], rng=0))
    bad = Reports(wd, values=np.array([8], dtype=np.uint8))
    with pytest.raises(ValueError):
        wd.aggregate(bad)
    with pytest.raises(ValueError, match="p must be > q"):
        wiener_deconvolve(np.ones(4) / 4, 0.2, 0.3, 0.0)
    with pytest.raises(ValueError, match="observed must be a 1-D array"):
        wiener_deconvolve(np.ones(1), 0.5, 0.2, 0.0)
    with pytest.raises(ValueError, match="noise must be"):
        wiener_deconvolve(np.ones(4) / 4, 0.5, 0.2, -1.0)


def test_grr_and_oue_specs_are_the_library_oracles():
    wd = WienerDeconvolution(epsilon=1.0, buckets=8, oracle="grr")
    assert wd.oracle_spec == GRR(epsilon=1.0, domain_size=8)
    wd = WienerDeconvolution(epsilon=1.0, buckets=8, oracle="oue")
    assert wd.oracle_spec == OUE(epsilon=1.0, domain_size=8)
