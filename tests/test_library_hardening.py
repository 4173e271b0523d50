"""Library hardening: bad inputs and edge cases found in review; each test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import ldpkit
from ldpkit import FrequencyEstimate, Stats
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
    with pytest.raises(TypeError, match=r"^values must be an array of numbers with rows of equal"):
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


# -- consistency --------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["norm", "norm_sub", "norm_mul", "base_pos"])
def test_consistency_refuses_overflowing_magnitudes(method):
    est = FrequencyEstimate([1e300, 0.2, 0.1], 0.01, n=100)
    with pytest.raises(
        ValueError, match=r"estimate must hold frequencies in \[-1e\+100, 1e\+100\]"
    ):
        getattr(ldpkit.consistency, method)(est)


# -- streams restored from dicts ----------------------------------------------------------------
def _tops_dict():
    from ldpkit import stream

    release = stream.ToPS(1.0, 10.0, threshold_size=16, length=256, rng=0)
    for v in np.linspace(0.0, 10.0, 100):
        release.update(v)
    return release.to_dict()


def test_stream_state_with_nan_is_refused():
    from ldpkit import stream

    data = _tops_dict()
    key = next(k for k, v in data["state"].items() if np.asarray(v).dtype.kind == "f")
    bad = np.array(data["state"][key], dtype=np.float64, copy=True)
    bad.flat[0] = np.nan
    data["state"] = {**data["state"], key: bad}
    with pytest.raises(ValueError, match=rf"data\.state\.{key} must hold finite numbers"):
        stream.stream_from_dict(data)
    data = _tops_dict()
    data["threshold"] = float("nan")
    with pytest.raises(ValueError, match=r"data\.threshold must be a finite number"):
        stream.stream_from_dict(data)
    stream.stream_from_dict(_tops_dict())  # the intact dict still loads


def test_stream_dict_of_another_class_is_refused_by_name():
    from ldpkit import stream

    data = _tops_dict()
    data["class"] = "PAK"  # PAK.__init__ takes no 'branching'
    with pytest.raises(
        ValueError, match=r"params must be parameters of PAK \[.*\], got \[.*'branching'"
    ):
        stream.stream_from_dict(data)


# -- Stats whose n disagrees with their arrays --------------------------------------------------
def _specs_without_fixed_totals():
    from ldpkit.frequency import SHE
    from ldpkit.numeric import CFOBinning, WienerDeconvolution

    return [
        StochasticRounding(epsilon=1.0),
        PiecewiseMechanism(epsilon=1.0),
        HybridMechanism(epsilon=1.0),
        CFOBinning(epsilon=1.0, buckets=16),  # OLH: support counts vary per report
        WienerDeconvolution(epsilon=1.0, buckets=32),  # OUE
        SHE(epsilon=1.0, domain_size=4),
    ]


@pytest.mark.parametrize("spec", _specs_without_fixed_totals(), ids=lambda s: s.name)
@pytest.mark.parametrize("n", [10**9, 1])
def test_stats_with_an_n_other_than_their_reports_are_refused(spec, n):
    from ldpkit import Stats

    rng = np.random.default_rng(0)
    if spec.name == "SHE":
        values = rng.integers(0, 4, size=3000)
    else:
        values = spec.low + (spec.high - spec.low) * rng.random(3000)
    stats = spec.aggregate(spec.randomize(values, rng=1))
    assert stats.n == 3000
    with pytest.raises(ValueError, match=r"stats\.\w+ must (be|sum to|be in|be integers)"):
        spec.estimate(Stats(spec, n, **stats.arrays))
    spec.estimate(Stats(spec, 3000, **stats.arrays))  # the true n is accepted
    assert Stats.from_dict(stats.to_dict()) == stats
    assert stats.merge(stats).n == 6000


def test_stochastic_rounding_refuses_impossible_sums():
    from ldpkit import Stats

    sr = StochasticRounding(epsilon=0.1)  # reports are +-C' = +-20.02
    c2 = sr.output_bound**2
    # -5 per report with the squares of 0.5 per report: no n = 10 reports make this
    with pytest.raises(ValueError, match=r"stats\.sum_squares must be in"):
        Stats(sr, 10, sum=np.float64(-50.0), sum_squares=np.float64(2.5), count=np.int64(10))
    ok = Stats(sr, 10, sum=np.float64(-50.0), sum_squares=np.float64(10 * c2), count=10)
    assert sr.estimate(ok).n == 10


def test_mean_stats_refuse_a_sum_beyond_cauchy_schwarz():
    from ldpkit import Stats

    pm = PiecewiseMechanism(epsilon=1.0)
    # |sum| = 10 from 4 reports needs sum_squares >= 25
    bad = Stats(pm, 4, sum=np.float64(10.0), sum_squares=np.float64(4.0), count=np.int64(4))
    with pytest.raises(ValueError, match=r"stats\.sum must satisfy sum\^2 <= n \* sum_squares"):
        pm.estimate(bad)
    good = Stats(pm, 4, sum=np.float64(10.0), sum_squares=np.float64(25.0), count=np.int64(4))
    assert pm.estimate(good).n == 4


# -- the demo's numerical timing ----------------------------------------------------------------
def test_numerical_demo_times_the_kernels_warm_up_apart():
    from ldpkit.demo import run_numerical

    values = np.random.default_rng(0).random(3000)
    result = run_numerical(values, 0.0, 1.0, epsilon=1.0, buckets=32, rng=1)
    assert result.warmup_seconds > 0.0 and result.seconds > 0.0


# -- messages and budgets the hostile sweep found -----------------------------------------------
def test_spawn_refuses_more_generators_than_it_can_make_quickly():
    with pytest.raises(ValueError, match=r"n must be an integer in \[0, 65536\]"):
        ldpkit.spawn(0, 2**20)
    assert len(ldpkit.spawn(0, 3)) == 3


def test_related_parameters_are_named():
    from ldpkit.frequency import RAPPOR
    from ldpkit.numeric import HHADMM
    from ldpkit.testing import binomial_z

    with pytest.raises(
        ValueError,
        match=r"num_hashes must be an integer in \[1, 1\], got 2 \(the bound is num_bits\)",
    ):
        RAPPOR(epsilon=1.0, domain_size=4, num_bits=1, num_hashes=2, num_cohorts=2)
    with pytest.raises(ValueError, match=r"buckets and branching must give at most"):
        HHADMM(epsilon=1.0, buckets=16, branching=2**20)
    with pytest.raises(ValueError, match=r"count \(at most n trials\) must be"):
        binomial_z(5, 2, 0.5)


def test_stream_bounds_whose_squares_underflow_are_refused():
    from ldpkit import stream

    with pytest.raises(ValueError, match=r"bound must be a finite number >= 1e-100"):
        stream.SWOnly(epsilon=1.0, bound=1e-300, buckets=64, rng=0)


# -- the slow constructors ----------------------------------------------------------------------
def test_square_wave_refuses_a_bucket_matrix_beyond_the_budget():
    with pytest.raises(ValueError, match=r"buckets=1024, output_buckets=1048576 must keep"):
        SquareWave(epsilon=1.0, output_buckets=2**20)
    with pytest.raises(ValueError, match=r"buckets=16384, output_buckets=16384 must keep the work"):
        SquareWave(epsilon=1.0, buckets=2**14)


@pytest.mark.parametrize("n, d", [(1, 9), (300, 8 * 64 + 3), (1000, 2000), (5, 64 * 8 * 3)])
def test_packed_column_counts_are_exact_across_tiles(n, d):
    from ldpkit.frequency._bits import column_counts

    bits = np.random.default_rng(n + d).random((n, d)) < 0.3
    np.testing.assert_array_equal(column_counts(np.packbits(bits, axis=1), d), bits.sum(axis=0))


def test_huge_domains_aggregate_in_seconds():
    import time

    from ldpkit.numeric import HaarWavelet, SignedSubsetSelection

    values = np.random.default_rng(0).random(40)
    for small, x in [
        (SignedSubsetSelection(epsilon=1.0, domain_size=64), np.arange(40) % 64),
        (HaarWavelet(epsilon=1.0, max_level=3), values),
    ]:
        small.aggregate(small.randomize(x, rng=0))  # load the compiled kernels
    sss = SignedSubsetSelection(epsilon=1.0, domain_size=2**20)
    haar = HaarWavelet(epsilon=1.0, expected_n=10**20)  # max_level 20
    for spec, x in [(sss, np.arange(40)), (haar, values)]:
        reports = spec.randomize(x, rng=0)
        start = time.perf_counter()
        stats = spec.aggregate(reports)
        # 14-24 s before (a 256-entry histogram per byte column: 268-512 MB of cache
        # misses); ~1 s now on a loaded 2-core machine
        assert time.perf_counter() - start < 8.0
        assert stats.n == 40


def test_estimates_beyond_memory_are_refused_at_construction():
    from ldpkit.frequency import RAPPOR
    from ldpkit.numeric import DiscreteSquareWave

    with pytest.raises(ValueError, match=r"buckets=1048576 \(n_outputs=\d+\) must keep the state"):
        DiscreteSquareWave(epsilon=1.0, buckets=2**20)
    with pytest.raises(ValueError, match=r"domain_size=100000000000000000000, num_cohorts=2"):
        RAPPOR(epsilon=1.0, domain_size=10**20, num_bits=16, num_hashes=2, num_cohorts=2)


def test_ragged_arrays_are_refused_everywhere_in_the_project_format():
    grr = GRR(epsilon=1.0, domain_size=4)
    ragged = [[1, 2], [3]]
    with pytest.raises(
        TypeError, match=r"^stats.counts must be an array of numbers with rows of equal"
    ):
        Stats(grr, 3, counts=ragged)
    with pytest.raises(TypeError, match=r"^frequencies must be"):
        FrequencyEstimate(ragged, 0.1, n=10)
    with pytest.raises(TypeError, match=r"^f must be frequencies in \[0, 1\]"):
        grr.variance(10, ragged)


def test_subset_selection_refuses_subsets_too_long_to_draw():
    from ldpkit.frequency import SubsetSelection

    with pytest.raises(ValueError, match=r"domain_size=1048576, subset_size=282006 must keep"):
        SubsetSelection(epsilon=1.0, domain_size=2**20)
    assert SubsetSelection(epsilon=1.0, domain_size=2**16).effective_subset_size == 17625
