"""The unvalidated pieces listed in issue 12, each refused with a message naming the parameter."""

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
        ({"buffer": np.array([1.0, math.nan])}, "buffer must be"),
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


@pytest.mark.parametrize("mechanism", ["SquareWave", "StochasticRounding", "HHADMM"])
def test_domains_whose_width_overflows_are_refused(mechanism):
    cls = ldpkit.spec.mechanism_registry()[mechanism]
    with pytest.raises(ValueError, match="high - low must be a finite width"):
        cls(epsilon=1.0, low=-1e308, high=1e308)


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
    """EMS on <= 8 buckets is pulled towards uniform (issue 12); EM is not, and says nothing."""
    values = np.r_[np.full(8900, 0.25), np.full(1100, 0.75)]
    spec = numeric.SquareWave(epsilon=8.0, buckets=2)
    stats = spec.aggregate(spec.randomize(values, rng=0))
    with pytest.warns(UserWarning, match="method='ems' with buckets = 2 <= 8 is heavily biased"):
        spec.estimate(stats)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        em = spec.estimate(stats, method="em")
    # EM's first bucket: true 0.89, standard error ~0.004 here; EMS gives ~0.6
    assert abs(em.probabilities[0] - 0.89) < 0.05
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
        (lambda: numeric.HHADMM(epsilon=1.0, buckets=2**20), "buckets must give at most"),
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
