"""Library findings of issue 27: each test failed on the code before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import ldpkit
from ldpkit import FrequencyEstimate
from ldpkit.frequency import GRR, heavy_hitters, significance_cutoff
from ldpkit.frequency.rappor import bloom_positions
from ldpkit.frequency.significance import expected_false_positive_cutoff
from ldpkit.numeric import (
    HaarHRR,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
    recommend,
    square_wave_bandwidth,
)


# -- significance_cutoff: alpha is a family-wise error probability ----------------------------
@pytest.mark.parametrize("alpha", [1.0, 1.5, 2.0])
def test_significance_cutoff_refuses_alpha_of_one_or_more(alpha):
    est = FrequencyEstimate([0.4, 0.3, 0.2, 0.1], 0.01, n=100)
    with pytest.raises(ValueError, match=r"alpha must be a finite number > 0 and < 1"):
        significance_cutoff(est, alpha)
    with pytest.raises(ValueError, match=r"alpha must be"):
        heavy_hitters(est, alpha)


def test_base_cut_keeps_expected_false_positives():
    est = FrequencyEstimate([0.5, 0.3, 0.15, 0.05, -0.02], 0.0025, n=1000)
    # CON20's alpha = 2 expected false positives is a count, not a probability
    cut = expected_false_positive_cutoff(est, 2.0)
    assert cut[0] == pytest.approx(0.2533471 * 0.05, rel=1e-6)  # Phi^-1(1 - 2/5) sqrt(Var)
    np.testing.assert_array_equal(
        ldpkit.consistency.base_cut(est).frequencies, [0.5, 0.3, 0.15, 0.05, 0.0]
    )


# -- recommend never recommends an unbuildable spec -------------------------------------------
def test_recommend_refuses_what_it_cannot_build():
    with pytest.raises(ValueError, match=r"epsilon must be a finite number >= 1e-06 and <= 40"):
        recommend(1e4, 100)
    for smooth in (None, True, False):
        recommend(4.0, 1000, smooth).build()


# -- Encoder ------------------------------------------------------------------------------------
def test_encoder_top_must_be_positive():
    with pytest.raises(ValueError, match=r"top must be an integer >= 1, got 0"):
        ldpkit.Encoder.from_values(["a", "b", "a"], top=0)
    with pytest.raises(TypeError, match=r"top must be an integer"):
        ldpkit.Encoder.from_values(["a", "b", "a"], top=1.5)
    enc = ldpkit.Encoder.from_values(["a", "b", "a", "c"], top=1, unknown="other")
    assert enc.domain_size == 2  # "a" and the other bucket


def test_encoder_refuses_nested_labels():
    enc = ldpkit.Encoder.from_values(["a", "b"])
    with pytest.raises(TypeError, match=r"labels must be a 1-D sequence of labels"):
        enc.encode([["a"]])


# -- ragged inputs ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, values",
    [
        (GRR(epsilon=1.0, domain_size=4), [[1, 2], [3]]),
        (StochasticRounding(epsilon=1.0), [[0.1, 0.2], [0.3]]),
        (SquareWave(epsilon=1.0, buckets=16), [[0.1], [0.2, 0.3]]),
    ],
)
def test_ragged_values_are_refused_in_the_project_format(spec, values):
    with pytest.raises(TypeError, match=r"^values must be a 1-D array of .*, got \[\["):
        spec.randomize(values, rng=0)


# -- SquareWave ---------------------------------------------------------------------------------
def test_square_wave_one_bucket_is_refused():
    with pytest.raises(ValueError, match=r"buckets must be an integer in \[2, "):
        SquareWave(epsilon=1.0, buckets=1)
    with pytest.raises(ValueError, match=r"output_buckets must be an integer in \[2, "):
        SquareWave(epsilon=1.0, buckets=4, output_buckets=1)


def test_square_wave_few_buckets_default_is_unbiased():
    x = np.random.default_rng(0).beta(2, 5, size=20_000)
    truth = np.mean(x < 0.5)  # 0.89
    spec = SquareWave(epsilon=8.0, buckets=2)
    p = spec.run(x, rng=0).probabilities
    # EM's error here is a few 1e-3 (n = 2e4); EMS gave [0.61, 0.39]
    assert abs(p[0] - truth) < 0.02
    with pytest.warns(UserWarning, match="heavily biased"):
        biased = spec.estimate(spec.aggregate(spec.randomize(x, rng=0)), method="ems")
    assert abs(biased.probabilities[0] - truth) > 0.1  # why the default avoids it


def test_square_wave_bandwidth_stays_in_its_range():
    with pytest.raises(ValueError, match=r"epsilon must be a finite number >= 1e-06 and <= 700"):
        square_wave_bandwidth(1e4)
    b = square_wave_bandwidth(700.0)
    assert 0.0 < b <= 0.5


# -- bloom_positions ----------------------------------------------------------------------------
def test_bloom_positions_refuses_mismatched_lengths():
    with pytest.raises(
        ValueError,
        match=r"items and cohorts must have broadcastable shapes \(1-D: the same length\)",
    ):
        bloom_positions([1, 2], [0], num_bits=16, num_hashes=2)
    same = bloom_positions([1, 2], [0, 0], num_bits=16, num_hashes=2)
    np.testing.assert_array_equal(bloom_positions([1, 2], 0, num_bits=16, num_hashes=2), same)


# -- narrow and offset ranges -------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda lo, hi: HaarHRR(epsilon=1.0, buckets=64, low=lo, high=hi),
        lambda lo, hi: StochasticRounding(epsilon=1.0, low=lo, high=hi),
        lambda lo, hi: PiecewiseMechanism(epsilon=1.0, low=lo, high=hi),
        lambda lo, hi: HybridMechanism(epsilon=1.0, low=lo, high=hi),
    ],
)
@pytest.mark.parametrize("low, high", [(1e15, 1e15 + 1), (0.0, 1e-300), (-1e-120, 1e-120)])
def test_unresolvable_ranges_are_refused(make, low, high):
    with pytest.raises(ValueError, match=r"high - low must be a width >= 1e-100 and >= 9.31e-10"):
        make(low, high)


@pytest.mark.parametrize(
    "make",
    [
        lambda lo, hi: StochasticRounding(epsilon=1.0, low=lo, high=hi),
        lambda lo, hi: PiecewiseMechanism(epsilon=1.0, low=lo, high=hi),
        lambda lo, hi: HybridMechanism(epsilon=1.0, low=lo, high=hi),
    ],
)
@pytest.mark.parametrize("low, high", [(1e6, 1e6 + 1e-2), (1e-90, 2e-90), (-5e9, -4e9)])
def test_mean_on_narrow_resolvable_ranges_is_within_its_error_bars(make, low, high):
    spec = make(low, high)
    rng = np.random.default_rng(1)
    x = low + (high - low) * rng.beta(2, 5, size=20_000)
    est = spec.run(x, rng=2)
    z = (est.mean - x.mean()) / np.sqrt(spec.variance_at(x.size, x))
    assert abs(z) < 5
