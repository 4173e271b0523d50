import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpkit import GRR, Reports, Stats
from ldpkit.spec import mechanism_registry, spec_from_dict


def test_spec_is_frozen_hashable_and_validated():
    spec = GRR(epsilon=1, domain_size=4)
    assert spec.epsilon == 1.0 and isinstance(spec.epsilon, float)
    assert spec == GRR(epsilon=1.0, domain_size=4) and hash(spec) == hash(
        GRR(epsilon=1.0, domain_size=4)
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.epsilon = 2.0
    with pytest.raises(TypeError):
        GRR(1.0, 4)  # keyword-only
    assert spec.fingerprint == GRR(epsilon=1.0, domain_size=4).fingerprint
    assert spec.fingerprint != GRR(epsilon=1.0, domain_size=5).fingerprint
    assert spec_from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert "GRR" in mechanism_registry()


def test_spec_from_dict_unknown():
    with pytest.raises(ValueError, match="mechanism must be one of"):
        spec_from_dict({"mechanism": "Nope", "params": {}})


def test_reports_are_immutable_and_checked():
    spec = GRR(epsilon=1.0, domain_size=4)
    r = spec.randomize([0, 1, 2, 3], rng=0)
    with pytest.raises(ValueError):
        r.values[0] = 1
    with pytest.raises(AttributeError, match="immutable"):
        r.values = np.zeros(4)
    with pytest.raises(AttributeError, match="has no field 'bits'"):
        r.bits  # noqa: B018
    with pytest.raises(ValueError, match="one row per user"):
        Reports(spec, values=np.zeros(3), other=np.zeros(4))
    assert len(r[1:3]) == 2 and len(r.concat(r)) == 8


def test_bad_report_content_rejected():
    spec = GRR(epsilon=1.0, domain_size=4)
    with pytest.raises(ValueError, match=r"reports.values must be items in \[0, 4\)"):
        spec.aggregate(Reports(spec, values=np.array([0, 9], dtype=np.uint8)))


def test_stats_from_dict_rejects_tampered_fingerprint():
    spec = GRR(epsilon=1.0, domain_size=4)
    d = spec.aggregate(spec.randomize([0, 1], rng=0)).to_dict()
    d["fingerprint"] = "0" * 16
    with pytest.raises(ValueError, match="fingerprint must match"):
        Stats.from_dict(d)


SPEC = GRR(epsilon=1.0, domain_size=6)
batches = st.lists(st.integers(0, 5), min_size=0, max_size=40).map(
    lambda xs: SPEC.aggregate(SPEC.randomize(np.array(xs, dtype=np.int64), rng=len(xs)))
)


@settings(max_examples=60, deadline=None)
@given(batches, batches, batches)
def test_merge_is_associative_and_commutative(a, b, c):
    assert a.merge(b).merge(c) == a.merge(b.merge(c))
    assert a.merge(b) == b.merge(a)
    assert a.merge(Stats.empty(SPEC)) == a


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=60), st.integers(0, 60))
def test_aggregate_of_union_is_merge(xs, cut):
    r = SPEC.randomize(np.array(xs, dtype=np.int64), rng=1)
    cut = min(cut, len(r))
    assert SPEC.aggregate(r) == SPEC.aggregate(r[:cut]).merge(SPEC.aggregate(r[cut:]))


def test_aggregator_accumulates_and_rejects_foreign_batches():
    from ldpkit import Aggregator

    spec = GRR(epsilon=1.0, domain_size=5)
    batches = [spec.randomize(np.arange(5), rng=i) for i in range(3)]
    agg = Aggregator(spec)
    for b in batches:
        agg.add(b)
    assert agg.stats == spec.aggregate(batches[0].concat(*batches[1:]))
    np.testing.assert_array_equal(agg.estimate().frequencies, spec.estimate(agg.stats).frequencies)
    other = GRR(epsilon=2.0, domain_size=5)
    with pytest.raises(ValueError, match="reports must come from"):
        agg.add(other.randomize([1], rng=0))
    with pytest.raises(ValueError, match="stats must come from"):
        agg.add_stats(other.empty_stats())
