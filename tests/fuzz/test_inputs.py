"""Pieces that once went unvalidated, each refused with a message naming the parameter."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest

import ldpkit
from ldpkit import GRR, Encoder, Reports, bloom_positions, numeric, split_budget, stream
from ldpkit.spec import spec_from_dict


@pytest.fixture(scope="module")
def tops_dict():
    values = np.random.default_rng(4).uniform(0, 10, size=64)
    tops = stream.ToPS(1.0, 10.0, threshold_size=16, length=256, rng=0)
    tops.update(values)
    return tops.to_dict()


def _changed(data, **changes):
    out = copy.deepcopy(data)
    for key, value in changes.items():
        if key.startswith("state."):
            out["state"][key[6:]] = value
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"n_seen": -1}, "n_seen must be an integer >= 0"),
        ({"n_seen": 3}, "n_seen must be >= threshold_size"),
        ({"n_seen": 2.5}, "n_seen must be an integer"),
        ({"threshold": math.nan}, "threshold must be a finite number"),
        ({"threshold": 11.0}, r"threshold must be a finite number >= 0 and <= 10"),
        ({"buffer": np.array([1.0, math.nan])}, "buffer must (be|hold finite)"),
        ({"rng": {"bit_generator": "Nope"}}, "rng"),
        ({"class": "Nope"}, "class must be one of"),
        ({"params": None}, "params must be a mapping"),
    ],
)
def test_stream_from_dict_refuses_bad_fields(tops_dict, changes, match):
    bad = _changed(tops_dict, **changes)
    with pytest.raises((ValueError, TypeError), match=match):
        stream.stream_from_dict(bad)
    assert stream.stream_from_dict(tops_dict).n_seen == 64  # the untouched dict still loads


@pytest.mark.parametrize("key", ["tree_noisy_0", "tree_bottom_up_0", "leaf_buffer", "child_fill"])
def test_stream_from_dict_refuses_truncated_arrays(tops_dict, key):
    bad = _changed(tops_dict, **{f"state.{key}": tops_dict["state"][key][:-1]})
    with pytest.raises(ValueError, match="state"):
        stream.stream_from_dict(bad)


def test_stream_from_dict_refuses_missing_keys(tops_dict):
    bad = dict(tops_dict)
    del bad["buffer"]
    with pytest.raises(ValueError, match=r"data must hold the keys .*missing \['buffer'\]"):
        stream.stream_from_dict(bad)
    with pytest.raises(TypeError, match="data must be a mapping"):
        stream.stream_from_dict([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: stream.choose_threshold(
                [1.0, math.nan], 1.0, 10.0, length=64, branching=4, levels=3
            ),
            "values must be",
        ),
        (
            lambda: stream.choose_threshold(
                [1.0, 11.0], 1.0, 10.0, length=64, branching=4, levels=3
            ),
            r"values must be .* in \[0, 10\]",
        ),
        (lambda: stream.pak_threshold([1.0, math.inf], 1.0, 10.0, delta=1e-4), "values must be"),
        (lambda: stream.pak_threshold([1.0, 12.0], 1.0, 10.0, delta=1e-4), "values must be"),
        (
            lambda: stream.exponential_mechanism_probabilities([1.0, math.nan], 1.0),
            "scores must be",
        ),
        (lambda: stream.exponential_mechanism_probabilities([], 1.0), "scores must be"),
        (lambda: stream.OnlineHierarchy(1, 3, 2, 1.0), "branching must be"),
        (lambda: stream.OnlineHierarchy(4, 3, 2.5, 1.0), "leaf_size must be"),
        (lambda: stream.OnlineHierarchy(4, 3, 2, math.nan), "scale must be"),
        (lambda: stream.OnlineHierarchy(4, 3, 2**40, 1.0), "leaf_size must be"),
        (lambda: stream.range_errors([1.0], [1.0], [5], [2]), "stops must be > starts"),
        (lambda: stream.range_errors([math.nan], [1.0], [0], [2]), "estimates must be"),
        (lambda: stream.range_errors([1.0, 2.0], [1.0], [0, 0], [2, 2]), "truths must be"),
    ],
)
def test_stream_helpers_refuse_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_online_hierarchy_refuses_bad_ranges():
    h = stream.OnlineHierarchy(4, 3, 2, 1.0)
    h.add(np.ones(16), np.random.default_rng(0))
    assert h.leaf_range_sums(np.array([0]), np.array([8])).shape == (1,)
    with pytest.raises(ValueError, match="hi must be >= lo"):
        h.leaf_range_sums(np.array([5]), np.array([2]))
    with pytest.raises(ValueError, match="hi must be"):
        h.leaf_range_sums(np.array([0]), np.array([9]))  # only 8 complete leaves
    with pytest.raises(TypeError, match="values must be"):
        h.add(np.array(["a"]), np.random.default_rng(0))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"items": [1, 2], "num_bits": 0}, ValueError, "num_bits must be"),
        ({"items": [-1, 2]}, ValueError, "items must be"),
        ({"items": [1.5]}, TypeError, "items must be"),
        ({"items": [1], "num_hashes": 1.5}, TypeError, "num_hashes must be"),
        ({"items": [1, 2], "cohorts": [0, 1, 2]}, ValueError, "items and cohorts must"),
    ],
)
def test_bloom_positions_validates(kwargs, error, match):
    full = {"cohorts": 0, "num_bits": 16, "num_hashes": 2, **kwargs}
    with pytest.raises(error, match=match):
        bloom_positions(**full)


def test_wave_bucket_matrix_and_smooth_refuse_invalid_input():
    b = numeric.square_wave_bandwidth(1.0)
    with pytest.raises(ValueError, match="density_low must be"):
        numeric.wave_bucket_matrix(b, 1.0, -0.1, 4, 4)
    with pytest.raises(ValueError, match="ratio must be"):
        numeric.wave_bucket_matrix(b, 2.0, 0.1, 4, 4)
    with pytest.raises(ValueError, match="theta must be"):
        numeric.smooth(np.zeros(8))


def _numerical_mechanisms():
    import dataclasses

    return sorted(
        name
        for name, cls in ldpkit.spec.mechanism_registry().items()
        if {"low", "high"} <= {f.name for f in dataclasses.fields(cls)}
    )


_NUMERICAL = _numerical_mechanisms()


def test_every_numerical_spec_is_checked_below():
    # the bounds tests below cover every registered spec with a [low, high] domain
    assert {"StochasticRounding", "PiecewiseMechanism", "HybridMechanism", "SquareWave"} <= set(
        _NUMERICAL
    )
    assert {"DiscreteSquareWave", "HierarchicalHistogram", "HaarHRR", "HaarWavelet"} <= set(
        _NUMERICAL
    )
    assert "AutoDistribution" in _NUMERICAL


@pytest.mark.parametrize("mechanism", _NUMERICAL)
@pytest.mark.parametrize(
    ("low", "high", "match"),
    [
        # 1e300 used to be accepted, then the squared half-span raised OverflowError
        (0.0, 1e300, r"high must be a finite number >= -1e\+100 and <= 1e\+100, got 1e\+300"),
        (-1e300, 0.0, r"low must be a finite number >= -1e\+100 and <= 1e\+100, got -1e\+300"),
        (0.0, 1.01e100, r"high must be a finite number >= -1e\+100 and <= 1e\+100"),
        (-1e308, 1e308, r"low must be a finite number >= -1e\+100"),
        (-1e100, 1e100, r"high - low must be a width <= 1e\+100, got \[-1e\+100, 1e\+100\]"),
    ],
)
def test_numerical_domains_beyond_max_magnitude_are_refused(mechanism, low, high, match):
    with pytest.raises(ValueError, match=match):
        ldpkit.testing.small_spec(mechanism, low=low, high=high)


@pytest.mark.parametrize("mechanism", _NUMERICAL)
def test_numerical_domains_at_max_magnitude_estimate_finite_answers(mechanism):
    from ldpkit.numeric import Distribution

    spec = ldpkit.testing.small_spec(mechanism, epsilon=1e-3, low=-5e99, high=5e99)
    if mechanism == "DiscreteSquareWave":
        values = np.arange(200) % spec.buckets
    elif hasattr(spec, "_contract_values"):  # not one real per user (e.g. (group, value) rows)
        values = spec._contract_values(200, np.random.default_rng(0))
    else:
        values = np.linspace(-5e99, 5e99, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning is a failure too
        est = spec.run(values, rng=0)
        if isinstance(est, Distribution):
            answers = [est.mean(), est.var(), est.cdf(np.array([0.0]))]
        elif hasattr(est, "means"):  # one mean per group (ldpkit.multidim.GroupMean)
            ok = getattr(est, "estimable", slice(None))  # TupleMeans: every mean
            answers = [est.means[ok], est.variance[ok]]
        elif hasattr(est, "range_query"):  # range queries (ldpkit.multidim.HDG, TDG, ...)
            box = ((-1e99, 3e99), (0.0, 5e99))
            answers = [np.array([est.range_query(box), est.std_error(box)])]
        else:
            answers = [est.mean, est.variance, *est.mean_interval(0.05)]
    assert np.all(np.isfinite(np.concatenate([np.ravel(a) for a in answers])))


@pytest.mark.parametrize("mechanism", ["StochasticRounding", "PiecewiseMechanism"])
def test_estimate_variance_refuses_widths_whose_squares_exceed_max_magnitude(mechanism):
    from ldpkit.numeric import estimate_variance

    spec = ldpkit.testing.small_spec(mechanism, low=0.0, high=1e60)
    with pytest.raises(ValueError, match=r"spec.high - spec.low must be < 1e\+50"):
        estimate_variance(spec, np.linspace(0.0, 1e60, 10), rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = estimate_variance(spec.__class__(epsilon=1.0, low=0.0, high=9e49), [0.0, 9e49], rng=0)
    assert math.isfinite(ok.variance)


def test_masked_arrays_are_refused_not_unmasked():
    values = np.ma.MaskedArray([0, 1, 2], mask=[False, True, False])
    with pytest.raises(TypeError, match="values must be a plain array, not a masked array"):
        GRR(epsilon=1.0, domain_size=4).randomize(values, rng=0)
    with pytest.raises(TypeError, match="values must be a plain array"):
        numeric.SquareWave(epsilon=1.0, buckets=16).randomize(values / 4.0, rng=0)


def test_reports_concat_refuses_mixed_dtypes():
    spec = GRR(epsilon=1.0, domain_size=6)
    reports = spec.randomize(np.arange(6), rng=0)
    other = Reports(spec, values=reports.values.astype(np.int64))
    with pytest.raises(ValueError, match="reports.values must have dtype"):
        reports.concat(other)


def test_spec_from_dict_refuses_private_classes():
    with pytest.raises(ValueError, match="mechanism must be one of"):
        spec_from_dict({"mechanism": "_MeanMechanism", "params": {"epsilon": 1.0}})


def test_split_budget_never_returns_zeros():
    with pytest.raises(ValueError, match="parts must be"):
        split_budget(1e-6, 3)
    with pytest.raises(ValueError, match="parts must"):
        split_budget(1.0, [1e-300, 1.0])


def test_encoder_refuses_reserved_labels():
    with pytest.raises(ValueError, match="categories must not contain the reserved labels"):
        Encoder(["<other>", "<other>"])
    with pytest.raises(ValueError, match="categories must not contain the reserved labels"):
        Encoder(["a", "<other>"], unknown="other")


def test_square_wave_ems_on_few_buckets_warns():
    """EMS on <= 8 buckets is pulled towards uniform; EM is not, and says nothing."""
    values = np.r_[np.full(8900, 0.25), np.full(1100, 0.75)]
    spec = numeric.SquareWave(epsilon=8.0, buckets=2)
    stats = spec.aggregate(spec.randomize(values, rng=0))
    with pytest.warns(UserWarning, match="method='ems' with buckets = 2 <= 8 is heavily biased"):
        spec.estimate(stats, method="ems")
    with warnings.catch_warnings():  # the default is EM there
        warnings.simplefilter("error")
        default = spec.estimate(stats)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        em = spec.estimate(stats, method="em")
    # EM's first bucket: true 0.89, standard error ~0.004 here; EMS gives ~0.6
    assert abs(em.probabilities[0] - 0.89) < 0.05
    np.testing.assert_array_equal(default.probabilities, em.probabilities)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        numeric.SquareWave(epsilon=8.0, buckets=16).estimate(
            numeric.SquareWave(epsilon=8.0, buckets=16).aggregate(
                numeric.SquareWave(epsilon=8.0, buckets=16).randomize(values, rng=0)
            )
        )


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            lambda: numeric.HHADMM(epsilon=1.0, buckets=2**20),
            "buckets and branching must give at most",
        ),
        (lambda: GRR(epsilon=1.0, domain_size=2**31), "memory budget"),
        (lambda: numeric.HaarWavelet(epsilon=1.0, expected_n=1e20), "expected_n must be"),
    ],
)
def test_huge_sizes_are_refused_up_front(build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build()


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("n", [100, 10_000, 10**7])
@pytest.mark.parametrize("smooth", [None, True, False])
def test_every_recommendation_builds(epsilon, n, smooth):
    rec = numeric.recommend(epsilon, n, smooth, low=-3.0, high=5.0)
    spec = rec.build()
    assert spec.epsilon == epsilon
    assert (spec.low, spec.high) == (-3.0, 5.0)


# --- magnitudes whose squares or sums overflow are refused, never inf --------------------------
_HUGE = np.array([1e308, 0.25, 0.25, 0.5])
_FREQ = np.array([0.25, 0.25, 0.25, 0.25])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: ldpkit.metrics.mse(_HUGE, _FREQ), r"estimate must hold frequencies in \[-1e\+100"),
        (lambda: ldpkit.queries.mse(_FREQ, _HUGE), r"truth must hold frequencies in \[-1e\+100"),
        (
            lambda: ldpkit.metrics.variance_error(0.1, _HUGE),
            r"truth must be .*\[-1e\+100, 1e\+100\]",
        ),
        (
            lambda: ldpkit.experiments.frequency_mse(_FREQ, _HUGE),
            r"truth must be .*\[-1e\+100, 1e\+100\]",
        ),
        (
            lambda: stream.range_errors(_HUGE, _FREQ, [0, 0, 0, 0], [1, 1, 1, 1]),
            r"estimates must be .*\[-1e\+100, 1e\+100\]",
        ),
        (
            lambda: stream.range_errors(_FREQ, _HUGE, [0, 0, 0, 0], [1, 1, 1, 1]),
            r"truths must be .*\[-1e\+100, 1e\+100\]",
        ),
        (
            lambda: ldpkit.testing.chisquare_gof(_HUGE, _FREQ),
            r"observed must be .*\[0, 1e\+100\]",
        ),
        (
            lambda: numeric.em(_HUGE, np.full((4, 4), 0.25)),
            r"data must be .*\[0, 1e\+100\]",
        ),
        (
            lambda: numeric.ems(_HUGE, np.full((4, 4), 0.25)),
            r"data must be .*\[0, 1e\+100\]",
        ),
    ],
)
def test_overflowing_magnitudes_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bounded_metrics_still_score_large_finite_values():
    # the bound refuses only magnitudes whose squares overflow: 1e90 still scores, exactly
    est = np.array([1e90, 0.0])
    assert ldpkit.metrics.mse(est, np.zeros(2)) == pytest.approx(0.5e180)
    assert ldpkit.metrics.variance_error(0.0, est) == pytest.approx(0.25e180)
    assert math.isfinite(stream.range_errors(est, np.zeros(2), [0, 0], [1, 1])["mse"])


def test_consistency_compare_refuses_overflowing_truth():
    f = np.array([0.5, 0.3, 0.2, 0.0])
    est = GRR(domain_size=4, epsilon=1.0).run([0, 1, 2, 3] * 5, rng=0)
    with pytest.raises(ValueError, match=r"truth must be .*1e\+100"):
        ldpkit.consistency.compare(est, np.r_[1e308, f[1:]], methods=["base"], rng=0)


def test_evaluate_ranges_refuses_overflowing_values():
    rel = stream.ToPS(1.0, 10.0, threshold_size=4, length=16, rng=0)
    rel.update(np.linspace(0, 10, 12))
    values = np.zeros(rel.n_released)
    values[0] = 1e308
    with pytest.raises(ValueError, match=r"values must be .*1e\+100"):
        stream.evaluate_ranges(rel, values, count=5, rng=0)


def test_smooth_scales_huge_weights_instead_of_overflowing():
    out = numeric.smooth(np.array([1e308, 1e308, 0.0]))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, numeric.smooth(np.array([1.0, 1.0, 0.0])))
    with pytest.raises(ValueError, match="theta must be"):
        numeric.smooth(np.zeros(3))


@pytest.mark.parametrize(
    "cls", [numeric.StochasticRounding, numeric.PiecewiseMechanism, numeric.HybridMechanism]
)
def test_one_report_gives_the_worst_case_variance_not_nan(cls):
    spec = cls(epsilon=1.0, low=0.0, high=1.0)
    one = spec.run(0.3, rng=0)
    assert one.n == 1 and one.variance_empirical == one.variance == spec.variance(1)
    assert all(math.isfinite(x) for x in one.mean_interval())
    # the tiny first group of estimate_variance holds one user: still finite
    res = numeric.estimate_variance(spec, np.linspace(0, 1, 50), split=1e-300, rng=0)
    assert res.first.n == 1 and math.isfinite(res.first.variance_empirical)


def test_frequency_estimate_refuses_infinite_variance():
    with pytest.raises(ValueError, match="variance must be finite numbers >= 0"):
        ldpkit.FrequencyEstimate(np.full(3, 1 / 3), [0.1, math.inf, 0.1], 10)


def test_subset_selection_huge_domain_names_domain_size():
    with pytest.raises(ValueError, match=r"domain_size=9223372036854775808 must keep the state"):
        ldpkit.SubsetSelection(epsilon=1.0, domain_size=2**63)


@pytest.mark.parametrize("cls", [stream.PAK, stream.NME])
def test_pak_nme_refuse_threshold_size_none(cls):
    with pytest.raises(TypeError, match="threshold_size must be an integer >= 1, got None"):
        cls(epsilon=1.0, bound=10.0, threshold_size=None, length=64, rng=0)
    assert cls(epsilon=1.0, bound=10.0, threshold_size=8, length=64, rng=0).threshold_size == 8


@pytest.mark.parametrize("times", [None, [None], ["2026-11-23", "NaT"], np.array(["NaT"], "M8[s]")])
def test_window_keys_refuses_missing_times(times):
    with pytest.raises((TypeError, ValueError), match="times must be datetime64 or ISO date"):
        stream.window_keys(times)


@pytest.mark.parametrize("fn", [stream.topl_threshold_objective, stream.choose_topl_threshold])
def test_topl_threshold_refuses_overflowing_bound(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on the way to the refusal
        with pytest.raises(
            ValueError, match=r"bound must be a finite number >= 1e-100 and <= 1e\+100"
        ):
            fn([0.5, 0.5], 1e308, 1.0, 100)
    assert math.isfinite(stream.choose_topl_threshold([0.5, 0.5], 1e100, 1.0, 100))


@pytest.mark.parametrize(
    ("spec", "values", "error", "match"),
    [
        (
            GRR(epsilon=1.0, domain_size=4),
            np.ones(3, bool),
            TypeError,
            "values must be an array of integers",
        ),
        (GRR(epsilon=1.0, domain_size=4), np.array([0.5, 1.5]), TypeError, "a report field of GRR"),
        (
            numeric.SquareWave(epsilon=1.0),
            np.array([0.5, math.nan]),
            ValueError,
            "values must be an array of finite real numbers",
        ),
        (numeric.StochasticRounding(epsilon=1.0), np.ones(2, bool), TypeError, "finite real"),
    ],
)
def test_reports_check_each_fields_dtype(spec, values, error, match):
    with pytest.raises(error, match=match):
        Reports(spec, values=values)


def test_reports_still_accept_what_mechanisms_send():
    for spec in (GRR(epsilon=1.0, domain_size=4), numeric.SquareWave(epsilon=1.0, buckets=8)):
        values = [0, 1, 2, 3] if isinstance(spec, GRR) else [0.1, 0.5, 0.9, 0.3]
        reports = spec.randomize(values, rng=0)
        again = Reports(spec, **reports.arrays)
        assert again.equals(reports) and len(spec.aggregate(again).counts) > 0


@pytest.mark.parametrize("source", [None, 1.5, True, object()])
def test_iter_reports_npz_names_a_bad_source(source):
    with pytest.raises(TypeError, match="source must be a path"):
        ldpkit.io.iter_reports_npz(source)


def test_wiener_iterative_estimate_refuses_work_beyond_budget():
    wd = numeric.WienerDeconvolution(epsilon=1.0, buckets=2**20)
    counts = np.zeros(2**20, dtype=np.int64)
    counts[7] = 1  # one report supporting bucket 7 (randomizing at 2^20 buckets is slow)
    stats = ldpkit.Stats(wd, 1, counts=counts, count=1)
    with pytest.raises(
        ValueError, match=r"buckets=1048576, max_iter=100 must keep the work .* 2\.1e\+09"
    ):
        wd.estimate(stats)
    # the direct filter (one update) and fewer updates stay within the budget
    assert wd.estimate(stats, method="direct").buckets == 2**20
    with pytest.raises(ValueError, match="max_iter=60 must keep the work"):
        wd.estimate(stats, max_iter=60)
    assert wd.estimate(stats, max_iter=1).buckets == 2**20
