"""CFO binning (SW20 section 4.1): oracle choice, wrapping of the oracle, estimates, accuracy."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest

from ldpkit import Reports, Stats
from ldpkit.consistency import norm_sub
from ldpkit.frequency import GRR, OLH, OUE
from ldpkit.metrics import wasserstein
from ldpkit.numeric import CFOBinning, Distribution
from ldpkit.numeric.binning import cfo_oracle
from ldpkit.testing import bonferroni_z

ALPHA = 1e-6


def beta_values(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).beta(5.0, 2.0, n)


# -- the oracle choice ---------------------------------------------------------------------
# Thresholds 3 e^eps + 2: eps 0.5 -> 6.95, 1 -> 10.15, 2 -> 24.17, 4 -> 165.8.
@pytest.mark.parametrize(("eps", "last_grr"), [(0.5, 6), (1.0, 10), (2.0, 24), (4.0, 165)])
def test_oracle_rule_boundaries(eps, last_grr):
    assert CFOBinning(epsilon=eps, buckets=last_grr).frequency_oracle.name == "GRR"
    assert CFOBinning(epsilon=eps, buckets=last_grr + 1).frequency_oracle.name == "OLH"
    assert CFOBinning(epsilon=eps, buckets=2).frequency_oracle.name == "GRR"


@pytest.mark.parametrize("eps", [0.25, 0.5, 1.0, 2.0, 3.0, 4.0])
def test_oracle_rule_everywhere(eps):
    for c in range(2, 300):
        expected = "GRR" if c < 3.0 * math.exp(eps) + 2.0 else "OLH"
        oracle = CFOBinning(epsilon=eps, buckets=c).frequency_oracle
        assert oracle.name == expected, (eps, c)
        assert oracle.domain_size == c and oracle.epsilon == eps


def test_sw20_settings_use_olh_at_eps_1_and_grr_at_eps_4():
    for c in (16, 32, 64):
        assert isinstance(CFOBinning(epsilon=1.0, buckets=c).frequency_oracle, OLH)
        assert isinstance(CFOBinning(epsilon=4.0, buckets=c).frequency_oracle, GRR)


def test_oracle_override():
    spec = CFOBinning(epsilon=1.0, buckets=16, oracle="OUE")
    assert spec.frequency_oracle == OUE(epsilon=1.0, domain_size=16)
    assert cfo_oracle(1.0, 4, "OLH").name == "OLH"


def test_validation():
    with pytest.raises(ValueError, match="buckets must be"):
        CFOBinning(epsilon=1.0, buckets=1)
    with pytest.raises(TypeError, match="buckets must be"):
        CFOBinning(epsilon=1.0, buckets=2.5)
    with pytest.raises(ValueError, match="oracle must be None or one of"):
        CFOBinning(epsilon=1.0, oracle="XYZ")
    with pytest.raises(ValueError, match="high must be"):
        CFOBinning(epsilon=1.0, low=1.0, high=1.0)
    with pytest.raises(ValueError, match="epsilon must be"):
        CFOBinning(epsilon=0.0)
    with pytest.raises(ValueError, match="buckets must be"):
        CFOBinning(epsilon=1.0, buckets=0)
    spec = CFOBinning(epsilon=1.0, low=-1.0, high=1.0, buckets=8)
    with pytest.raises(ValueError, match="values must be real numbers in"):
        spec.randomize([0.0, 1.5], rng=0)
    with pytest.raises(ValueError, match="values must be real numbers in"):
        spec.randomize([np.nan], rng=0)
    other = CFOBinning(epsilon=1.0, low=-1.0, high=1.0, buckets=16)
    with pytest.raises(ValueError):
        spec.aggregate(other.randomize([0.0, 0.5], rng=0))
    with pytest.raises(ValueError):
        spec.estimate(other.aggregate(other.randomize([0.0, 0.5], rng=0)))
    with pytest.raises(ValueError, match="n = 0"):
        spec.estimate(spec.empty_stats())


# -- the client is the oracle -----------------------------------------------------------------
def test_bin_index_matches_distribution_convention():
    spec = CFOBinning(epsilon=1.0, low=2.0, high=6.0, buckets=8)
    edges = np.linspace(2.0, 6.0, 9)
    assert spec.bucket_index(edges).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 7]
    assert spec.bucket_index((edges[:-1] + edges[1:]) / 2).tolist() == list(range(8))
    values = np.random.default_rng(3).uniform(2.0, 6.0, 5000)
    hist = np.bincount(spec.bucket_index(values), minlength=8) / values.size
    np.testing.assert_allclose(hist, Distribution.from_values(values, 2.0, 6.0, 8).probabilities)


@pytest.mark.parametrize(("eps", "bins"), [(1.0, 8), (1.0, 32), (4.0, 16)])
def test_reports_and_stats_are_the_oracles(eps, bins):
    spec = CFOBinning(epsilon=eps, buckets=bins)
    values = beta_values(3000, 1)
    reports = spec.randomize(values, rng=7)
    inner = spec.frequency_oracle.randomize(spec.bucket_index(values), rng=7)
    assert reports.spec == spec and reports.fields == inner.fields
    for name in inner.fields:
        np.testing.assert_array_equal(reports.arrays[name], inner.arrays[name])
    stats = spec.aggregate(reports)
    np.testing.assert_array_equal(stats.counts, spec.frequency_oracle.aggregate(inner).counts)
    assert stats.n == 3000


def test_stats_merge_json_pickle():
    spec = CFOBinning(epsilon=1.0, buckets=16)
    values = beta_values(4000, 2)
    ra, rb = spec.randomize(values[:1500], rng=1), spec.randomize(values[1500:], rng=2)
    whole = spec.aggregate(ra.concat(rb))
    assert whole == spec.aggregate(ra).merge(spec.aggregate(rb))
    assert whole == spec.empty_stats().merge(whole)
    assert Stats.from_dict(json.loads(json.dumps(whole.to_dict()))) == whole
    assert pickle.loads(pickle.dumps(whole)) == whole
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert spec.estimate(whole) == spec.estimate(Stats.from_dict(whole.to_dict()))
    assert isinstance(ra, Reports)


# -- the estimate ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("eps", "bins", "buckets"), [(1.0, 16, 256), (4.0, 16, 64), (1.0, 32, 100)]
)
def test_estimate_is_norm_sub_spread_uniformly(eps, bins, buckets):
    spec = CFOBinning(epsilon=eps, buckets=bins, low=-3.0, high=5.0)
    values = -3.0 + 8.0 * beta_values(20_000, 4)
    stats = spec.aggregate(spec.randomize(values, rng=3))
    plain = spec.estimate(stats)  # the unbiased bucket frequencies, no post-processing
    raw = spec.frequency_estimate(stats)
    np.testing.assert_allclose(
        plain.probabilities, raw.frequencies + (1 - raw.frequencies.sum()) / bins, atol=1e-15
    )
    assert plain.postprocessing == () and plain.n == 20_000 and plain.spec == spec
    dist = spec.estimate(stats, postprocess="norm_sub").rebin(buckets)
    assert dist.postprocessing == ("norm_sub",)
    assert isinstance(dist, Distribution)
    assert dist.buckets == buckets and (dist.low, dist.high) == (-3.0, 5.0)
    assert np.all(dist.probabilities >= 0) and abs(dist.probabilities.sum() - 1) < 1e-12
    raw = spec.frequency_estimate(stats)
    assert raw.unbiased and np.any(raw.frequencies < 0)  # the noise makes Norm-Sub matter
    expected = norm_sub(raw).frequencies
    # every bucket holds its overlap with the bins, each bin's mass spread uniformly
    bucket_edges = np.linspace(-3.0, 5.0, buckets + 1)
    bin_cdf = np.concatenate([[0.0], np.cumsum(expected)])
    overlap = np.diff(np.interp(bucket_edges, np.linspace(-3.0, 5.0, bins + 1), bin_cdf))
    np.testing.assert_allclose(dist.probabilities, overlap, atol=1e-12)
    if buckets % bins == 0:  # uniform inside every bin
        per_bin = dist.probabilities.reshape(bins, -1)
        np.testing.assert_allclose(
            per_bin,
            np.repeat(expected[:, None] / per_bin.shape[1], per_bin.shape[1], 1),
            atol=1e-15,
        )


@pytest.mark.parametrize(
    ("eps", "bins", "name"), [(1.0, 16, "OLH"), (4.0, 16, "GRR"), (2.0, 8, "GRR")]
)
def test_bin_estimates_unbiased_and_fail_with_wrong_epsilon(eps, bins, name):
    n = 200_000
    spec = CFOBinning(epsilon=eps, buckets=bins)
    assert spec.frequency_oracle.name == name
    values = beta_values(n, 5)
    truth = np.bincount(spec.bucket_index(values), minlength=bins) / n
    stats = spec.aggregate(spec.randomize(values, rng=11))
    oracle = spec.frequency_oracle
    sd = np.sqrt(oracle.variance(n, truth))
    limit = bonferroni_z(ALPHA, bins)
    z = (spec.frequency_estimate(stats).frequencies - truth) / sd
    assert np.max(np.abs(z)) <= limit, z
    # Power: interpreting the same counts with epsilon x 1.3 is detected.
    wrong = cfo_oracle(eps * 1.3, bins)
    z_wrong = (wrong.estimate(Stats(wrong, n, counts=stats.counts)).frequencies - truth) / sd
    assert np.max(np.abs(z_wrong)) > limit


# -- accuracy on Beta(5, 2), n = 1e5, eps = 1, 256 buckets (SW20 section 6.1) -----------------
# Measured over 30 (data, randomness) seeds: W1 mean / sd = CFO-16 0.0077 / 0.0036,
# CFO-32 0.0118 / 0.0062, CFO-64 0.0216 / 0.0086. Bounds: mean + 4 sd, rounded up.
# The broken variant (counts read with epsilon x 1.3) measured CFO-16 0.041 / 0.006
# (min 0.029 over 30 seeds), above its bound.
W1_BOUNDS = {16: 0.025, 32: 0.04, 64: 0.06}


class _WrongEpsilonCFO(CFOBinning):
    def frequency_estimate(self, stats):
        wrong = cfo_oracle(self.epsilon * 1.3, self.buckets, self.oracle)
        return wrong.estimate(Stats(wrong, stats.n, counts=stats.counts))


@pytest.mark.parametrize("bins", [16, 32, 64])
def test_w1_on_beta(bins):
    values = beta_values(100_000, 1000)
    spec = CFOBinning(epsilon=1.0, buckets=bins)
    dist = spec.estimate(spec.aggregate(spec.randomize(values, rng=0)), postprocess="norm_sub")
    assert wasserstein(dist, values) <= W1_BOUNDS[bins]


def test_w1_bound_fails_for_a_broken_estimator():
    values = beta_values(100_000, 1000)
    spec = _WrongEpsilonCFO(epsilon=1.0, buckets=16)
    dist = spec.estimate(spec.aggregate(spec.randomize(values, rng=0)), postprocess="norm_sub")
    assert wasserstein(dist, values) > W1_BOUNDS[16]
