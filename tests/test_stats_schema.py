"""Stats know their schema: construction, from_dict, merge and estimate refuse
arrays no batch of reports could have produced, instead of estimating from them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ldpkit import GRR, OUE, Stats
from ldpkit.frequency import SHE
from ldpkit.numeric import HierarchicalHistogram, PiecewiseMechanism
from ldpkit.spec import MAX_REPORTS


@pytest.fixture
def grr():
    return GRR(epsilon=1.0, domain_size=5)


def test_shape_and_field_names_are_checked(grr):
    with pytest.raises(ValueError, match=r"stats.counts must have shape \(5,\)"):
        Stats(grr, 3, counts=np.array([1, 1, 1, 0]))  # d - 1 counts
    with pytest.raises(ValueError, match="stats fields must be"):
        Stats(grr, 3, counts=np.array([1, 1, 1, 0, 0]), extra=np.zeros(5))
    with pytest.raises(ValueError, match="stats fields must be"):
        Stats(grr, 0)


def test_counts_bounded_by_what_n_reports_produce(grr):
    counts = grr.aggregate(grr.randomize(np.arange(30) % 5, rng=0)).counts
    with pytest.raises(ValueError, match="stats.counts must be integers in"):
        Stats(grr, 1, counts=counts)  # 30 reports' counts claimed as one report
    with pytest.raises(ValueError, match="stats.counts must sum to 30"):
        Stats(grr, 30, counts=np.array([1, 0, 0, 0, 0]))  # GRR: one item per report
    with pytest.raises(ValueError, match="stats.counts must be integers in"):
        Stats(grr, 2, counts=np.array([3, -1, 0, 0, 0]))
    with pytest.raises(TypeError, match="stats.counts must be an array of integers"):
        Stats(grr, 2, counts=np.array([1.0, 1.0, 0, 0, 0]))
    with pytest.raises(TypeError, match="stats.counts must be an array of integers"):
        Stats(grr, 2, counts=np.array([np.nan, 1.0, 0, 0, 0]))
    ok = Stats(grr, 30, counts=counts.astype(np.int32))
    assert ok.counts.dtype == np.int64 and ok == grr.aggregate(
        grr.randomize(np.arange(30) % 5, rng=0)
    )


@pytest.mark.parametrize(
    ("n", "exc"),
    [
        (3.7, TypeError),
        (True, TypeError),
        (1e30, TypeError),
        (-1, ValueError),
        (MAX_REPORTS + 1, ValueError),
    ],
)
def test_n_is_a_bounded_integer(grr, n, exc):
    with pytest.raises(exc, match="n must be an integer in"):
        Stats(grr, n, counts=np.zeros(5, dtype=np.int64))


def test_float_stats_finite_and_bounded():
    pm = PiecewiseMechanism(epsilon=1.0)
    b = pm.output_bound
    with pytest.raises(ValueError, match="stats.sum must be finite"):
        Stats(pm, 2, sum=np.float64(np.nan), sum_squares=np.float64(1.0), count=2)
    with pytest.raises(ValueError, match="stats.sum_squares must be in"):
        Stats(pm, 2, sum=np.float64(0.0), sum_squares=np.float64(-1.0), count=2)
    with pytest.raises(ValueError, match="stats.sum must be in"):
        Stats(pm, 2, sum=np.float64(2 * b + 0.01), sum_squares=np.float64(1.0), count=2)
    with pytest.raises(ValueError, match="stats.count must be 2 for n = 2 reports"):
        Stats(pm, 2, sum=np.float64(0.0), sum_squares=np.float64(1.0), count=1)
    Stats(pm, 2, sum=np.float64(2 * b), sum_squares=np.float64(2 * b * b), count=2)  # extreme


def test_tree_level_n_must_sum_to_n():
    hh = HierarchicalHistogram(epsilon=1.0, buckets=16)
    good = hh.aggregate(hh.randomize(np.linspace(0, 1, 40), rng=1))
    level_n = np.array(good.level_n)
    level_n[0] = -level_n[0]
    with pytest.raises(ValueError, match="stats.level_n"):
        Stats(hh, good.n, counts=good.counts, level_n=level_n)


def test_merge_refuses_int64_overflow():
    she = SHE(epsilon=1.0, domain_size=2)
    # Each within what 2^12 reports can produce (|sum| <= 2^51 per report), but not both.
    big = Stats(she, 2**12, sums=np.array([2**62, 0]), count=2**12)
    with pytest.raises(ValueError, match="would overflow int64"):
        big.merge(big)


def test_merge_of_one_count_is_refused_at_construction(grr):
    with pytest.raises(ValueError, match="shape"):
        grr.empty_stats().merge(Stats(grr, 1, counts=np.array([1])))


def _stats_dict(spec, values):
    return json.loads(json.dumps(spec.aggregate(spec.randomize(values, rng=2)).to_dict()))


def test_from_dict_round_trip_and_refusals():
    oue = OUE(epsilon=1.0, domain_size=4)
    data = _stats_dict(oue, [0, 1, 2, 3, 3])
    assert Stats.from_dict(data) == oue.aggregate(oue.randomize([0, 1, 2, 3, 3], rng=2))
    bad = {
        "format": ({**data, "format": "ldpkit.stats/2"}, ValueError, "stats format must be"),
        "missing": ({k: v for k, v in data.items() if k != "n"}, ValueError, "must have keys"),
        "float n": ({**data, "n": 3.7}, TypeError, "n must be an integer"),
        "dtype": (
            {**data, "arrays": {"counts": {**data["arrays"]["counts"], "dtype": "|O"}}},
            ValueError,
            "stats.counts dtype must be",
        ),
        "truncated": (
            {**data, "arrays": {"counts": {**data["arrays"]["counts"], "data": [1, 2, 3]}}},
            ValueError,
            "stats.counts data must be a flat list of 4",
        ),
        "not a dict": ([1, 2], TypeError, "a stats dict. must be a mapping"),
        "huge count": (
            {
                **data,
                "arrays": {"counts": {**data["arrays"]["counts"], "data": [2**70, 0, 0, 0]}},
            },
            ValueError,
            "stats.counts data must fit",
        ),
    }
    for payload, exc, words in bad.values():
        with pytest.raises(exc, match=words):
            Stats.from_dict(payload)


def test_estimate_only_sees_valid_stats(grr):
    # A Stats is immutable and validated when built, so estimate() can only see one that
    # fits the spec; foreign or empty ones are refused by check_stats.
    with pytest.raises(ValueError, match="at least one report"):
        grr.estimate(grr.empty_stats())
    with pytest.raises(ValueError, match="must come from"):
        grr.estimate(GRR(epsilon=1.0, domain_size=6).empty_stats())


def test_spec_from_dict_builds_only_public_mechanisms():
    from ldpkit.spec import spec_from_dict

    with pytest.raises(ValueError, match="mechanism must be one of"):
        spec_from_dict({"mechanism": "_MeanMechanism", "params": {"epsilon": 1.0}})
    with pytest.raises(ValueError, match="params must be fields of GRR"):
        spec_from_dict({"mechanism": "GRR", "params": {"epsilon": 1.0, "nope": 1}})
    with pytest.raises(TypeError, match="a spec dict. must be a mapping"):
        spec_from_dict(["GRR"])
    grr = GRR(epsilon=1.0, domain_size=5)
    assert spec_from_dict(grr.to_dict()) == grr


def test_reports_concat_refuses_mixed_dtypes():
    from ldpkit import Reports

    grr = GRR(epsilon=1.0, domain_size=5)
    a = grr.randomize([0, 1, 2], rng=0)
    b = Reports(grr, values=np.asarray(a.values, dtype=np.int64))
    assert a.values.dtype == np.uint8
    with pytest.raises(ValueError, match="reports.values must have dtype uint8"):
        a.concat(b)
    assert a.concat(a).equals(Reports(grr, values=np.concatenate([a.values, a.values])))
