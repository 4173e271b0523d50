"""Distribution: exact histogram queries, validation, immutability, sampling."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ldpkit.numeric import Distribution

ALPHA = 1e-6


@st.composite
def histograms(draw, min_buckets=1, max_buckets=40):
    """Random histograms with some empty buckets, on random intervals."""
    b = draw(st.integers(min_buckets, max_buckets))
    weights = draw(
        st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 10.0)), min_size=b, max_size=b).filter(
            lambda w: sum(w) > 0
        )
    )
    low = draw(st.floats(-100, 100))
    span = draw(st.floats(1e-2, 100))
    w = np.asarray(weights)
    return Distribution(w / w.sum(), low, low + span)


# -- construction and validation -------------------------------------------------------------
def test_basic_attributes():
    d = Distribution([0.25, 0.5, 0.25], low=-1.0, high=2.0)
    assert d.buckets == 3 and d.width == 1.0
    np.testing.assert_array_equal(d.edges, [-1.0, 0.0, 1.0, 2.0])
    np.testing.assert_array_equal(d.centers, [-0.5, 0.5, 1.5])
    np.testing.assert_array_equal(d.cumulative, [0.0, 0.25, 0.75, 1.0])


@pytest.mark.parametrize(
    "probs, match",
    [
        ([0.5, -0.1, 0.6], "finite and >= 0"),
        ([0.5, math.nan, 0.5], "finite and >= 0"),
        ([0.5, math.inf], "finite and >= 0"),
        ([0.5, 0.4], "sum to 1"),
        ([], "non-empty 1-D"),
        ([[0.5, 0.5]], "non-empty 1-D"),
    ],
)
def test_bad_probabilities(probs, match):
    with pytest.raises(ValueError, match=match):
        Distribution(probs)


def test_bad_types_and_bounds():
    with pytest.raises(TypeError, match="probabilities must be"):
        Distribution(["a", "b"])
    with pytest.raises(ValueError, match="high must be a finite number > low"):
        Distribution([1.0], low=1.0, high=1.0)
    with pytest.raises(ValueError, match="low must be a finite number"):
        Distribution([1.0], low=math.nan, high=1.0)
    with pytest.raises(TypeError, match="high must be"):
        Distribution([1.0], low=0.0, high="1")


def test_tiny_normalization_error_is_rescaled():
    d = Distribution([0.5, 0.5 + 1e-9])
    assert d.probabilities.sum() == pytest.approx(1.0, abs=1e-15)


def test_immutable():
    src = np.array([0.5, 0.5])
    d = Distribution(src)
    src[0] = 0.9  # the caller's array is copied
    assert d.probabilities[0] == 0.5
    with pytest.raises(ValueError):
        d.probabilities[0] = 0.1
    with pytest.raises(AttributeError, match="immutable"):
        d.low = 3.0


def test_round_trips_and_equality():
    d = Distribution([0.1, 0.2, 0.7], low=2.0, high=5.0)
    assert pickle.loads(pickle.dumps(d)) == d
    assert Distribution.from_dict(json.loads(json.dumps(d.to_dict()))) == d
    assert hash(d) == hash(Distribution([0.1, 0.2, 0.7], low=2.0, high=5.0))
    assert d != Distribution([0.1, 0.2, 0.7], low=2.0, high=6.0)
    assert d.rebin(3) is d


def test_from_values_counts_exactly():
    values = np.array([0.0, 0.1, 0.25, 0.5, 0.74, 0.75, 1.0, 1.0])
    d = Distribution.from_values(values, 0.0, 1.0, buckets=4)
    np.testing.assert_array_equal(d.probabilities, np.array([2, 1, 2, 3]) / 8)  # high -> last
    with pytest.raises(ValueError, match=r"values must be real numbers in \[0, 1\]"):
        Distribution.from_values([0.5, 1.5], 0.0, 1.0, buckets=4)
    with pytest.raises(ValueError, match="at least one value"):
        Distribution.from_values([], 0.0, 1.0, buckets=4)
    with pytest.raises(ValueError, match=r"buckets must be an integer in \[1, "):
        Distribution.from_values([0.5], 0.0, 1.0, buckets=0)


def test_from_cdf_matches_beta():
    law = stats.beta(5, 2)
    d = Distribution.from_cdf(law.cdf, 0.0, 1.0, 64)
    np.testing.assert_allclose(d.probabilities, np.diff(law.cdf(np.linspace(0, 1, 65))), atol=1e-15)


# -- exact queries ----------------------------------------------------------------------------
def test_cdf_pdf_closed_forms():
    d = Distribution([0.25, 0.5, 0.25], low=0.0, high=3.0)
    assert d.cdf(-1.0) == 0.0 and d.cdf(4.0) == 1.0
    np.testing.assert_allclose(
        d.cdf([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]), [0, 0.125, 0.25, 0.5, 0.75, 0.875, 1.0]
    )
    np.testing.assert_allclose(
        d.pdf([-0.1, 0.5, 1.5, 2.5, 3.0, 3.1]), [0, 0.25, 0.5, 0.25, 0.25, 0]
    )
    assert d.range(0.5, 2.5) == pytest.approx(0.75)
    assert d.range(0.0, 3.0) == 1.0
    with pytest.raises(ValueError, match="a must be <= b"):
        d.range(2.0, 1.0)


def test_quantile_closed_forms():
    d = Distribution([0.5, 0.0, 0.5], low=0.0, high=3.0)
    # Across the empty middle bucket the generalized inverse takes the left end.
    np.testing.assert_allclose(d.quantile([0.0, 0.25, 0.5, 0.75, 1.0]), [0.0, 0.5, 1.0, 2.5, 3.0])
    assert isinstance(d.quantile(0.3), float)
    assert d.quantile(np.zeros((2, 3))).shape == (2, 3)
    with pytest.raises(ValueError, match=r"q must be finite real numbers in \[0, 1\]"):
        d.quantile(1.5)
    with pytest.raises(ValueError, match="q must be"):
        d.quantile(math.nan)


def test_moments_closed_forms():
    u = Distribution.uniform(0.0, 1.0, 8)
    assert u.mean() == pytest.approx(0.5, abs=1e-15)
    assert u.var() == pytest.approx(1.0 / 12.0, abs=1e-15)
    spike = Distribution(np.eye(10)[3], 0.0, 10.0)  # uniform on [3, 4]
    assert spike.mean() == pytest.approx(3.5) and spike.var() == pytest.approx(1.0 / 12.0)
    two = Distribution([0.5, 0.0, 0.0, 0.5], 0.0, 4.0)  # halves on [0,1] and [3,4]
    assert two.var() == pytest.approx(1.5**2 + 1.0 / 12.0)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(histograms(), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20))
def test_quantile_inverts_cdf(dist, qs):
    q = np.asarray(qs)
    x = np.asarray(dist.quantile(q))
    assert np.all((x >= dist.low) & (x <= dist.high))
    pos = q > 0
    np.testing.assert_allclose(np.asarray(dist.cdf(x))[pos], q[pos], atol=1e-9)
    # generalized inverse: nothing to the left of x already reaches q
    left = np.asarray(dist.cdf(x - 1e-7 * (dist.high - dist.low)))
    assert np.all(left[pos] <= q[pos] + 1e-9)
    order = np.argsort(q)
    assert np.all(np.diff(x[order]) >= -1e-12)


@settings(max_examples=150, deadline=None)
@given(histograms(), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20))
def test_cdf_then_quantile_is_identity_where_density_positive(dist, us):
    x = dist.low + np.asarray(us) * (dist.high - dist.low)
    # F must be strictly increasing just left of x (at an edge after an empty bucket the
    # generalized inverse rightly returns the left end of the flat stretch)
    eps = 1e-9 * (dist.high - dist.low)
    keep = (np.asarray(dist.pdf(x)) > 0) & (np.asarray(dist.pdf(x - eps)) > 0)
    keep &= x > dist.low
    back = np.asarray(dist.quantile(np.asarray(dist.cdf(x))))
    np.testing.assert_allclose(back[keep], x[keep], atol=1e-8 * (dist.high - dist.low) + 1e-9)


@settings(max_examples=100, deadline=None)
@given(histograms(max_buckets=24), st.integers(1, 50))
def test_rebin_preserves_mass_and_cdf(dist, new):
    r = dist.rebin(new)
    assert r.buckets == new and r.probabilities.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(r.cumulative, dist.cdf(r.edges), atol=1e-12)
    fine = dist.rebin(dist.buckets * 3).rebin(dist.buckets)  # refine then coarsen: exact
    # atol: edges are computed at the magnitude of low/high, far above the bucket width
    np.testing.assert_allclose(fine.probabilities, dist.probabilities, atol=1e-9)
    assert r.mean() == pytest.approx(dist.mean(), abs=(dist.high - dist.low) / new)


def test_rebin_coarsens_by_summing():
    p = np.arange(1, 9) / 36.0
    d = Distribution(p).rebin(4)
    np.testing.assert_allclose(d.probabilities, p.reshape(4, 2).sum(1))


# -- sampling ---------------------------------------------------------------------------------
def test_sample_matches_cdf_ks():
    d = Distribution.from_cdf(stats.beta(5, 2).cdf, 0.0, 1.0, 32)
    x = d.sample(100_000, rng=1)
    assert x.dtype == np.float64 and x.shape == (100_000,)
    assert stats.kstest(x, d.cdf).pvalue > ALPHA
    shifted = Distribution.from_cdf(stats.beta(5.3, 2).cdf, 0.0, 1.0, 32)
    assert stats.kstest(x, shifted.cdf).pvalue < ALPHA  # the test has power
    np.testing.assert_array_equal(x, d.sample(100_000, rng=1))
    assert d.sample(0, rng=0).shape == (0,)


# -- plain (signed) estimates, provenance and explicit post-processing ---------------------------
SIGNED = [0.3, -0.05, 0.25, 0.4, 0.1]


def test_signed_distribution_needs_the_flag_and_keeps_linear_queries_exact():
    with pytest.raises(ValueError, match="finite and >= 0"):
        Distribution(SIGNED)
    d = Distribution(SIGNED, 0.0, 5.0, signed=True)
    assert d.signed and d.postprocessing == () and d.n is None and d.spec is None
    # cdf, range and mean are the linear functionals of the masses, negatives included
    assert d.cdf(2.0) == pytest.approx(0.25)
    assert d.range(1.0, 2.0) == pytest.approx(-0.05)  # not clamped: stays unbiased
    assert d.mean() == pytest.approx(float(np.dot(SIGNED, np.arange(5) + 0.5)))
    with pytest.raises(ValueError, match="quantile needs non-negative probabilities"):
        d.quantile(0.5)
    with pytest.raises(ValueError, match="sample needs non-negative probabilities"):
        d.sample(3, rng=0)
    # a signed flag on masses that are all >= 0 is simply a proper distribution
    assert not Distribution([0.5, 0.5], signed=True).signed


def _pava(y):
    """Least-squares non-decreasing fit by brute force over block merges (reference)."""
    blocks = [[float(v), 1] for v in y]
    i = 0
    while i < len(blocks) - 1:
        if blocks[i][0] / blocks[i][1] > blocks[i + 1][0] / blocks[i + 1][1]:
            blocks[i][0] += blocks[i + 1][0]
            blocks[i][1] += blocks[i + 1][1]
            del blocks[i + 1]
            i = max(i - 1, 0)
        else:
            i += 1
    return np.concatenate([np.full(c, s / c) for s, c in blocks])


def test_postprocess_methods_do_what_they_say():
    d = Distribution(SIGNED, 0.0, 5.0, n=1000, spec=None, signed=True)
    x = np.asarray(SIGNED)
    # norm_sub: the Euclidean projection onto the simplex, max(x + delta, 0) summing to 1
    sub = d.postprocess("norm_sub")
    delta = (sub.probabilities - x)[sub.probabilities > 0]
    np.testing.assert_allclose(delta, delta[0], atol=1e-15)
    assert np.all(sub.probabilities[sub.probabilities == 0] <= -delta[0] + x.max())
    # norm_mul: negatives to 0, rescaled
    mul = d.postprocess("norm_mul")
    np.testing.assert_allclose(mul.probabilities, np.maximum(x, 0) / np.maximum(x, 0).sum())
    # cdf: the cumulative masses replaced by their least-squares monotone fit, clipped
    fit = d.postprocess("cdf")
    want = np.clip(_pava(np.cumsum(x)), 0.0, 1.0)
    want[-1] = 1.0
    np.testing.assert_allclose(np.cumsum(fit.probabilities), want, atol=1e-15)
    for out, name in ((sub, "norm_sub"), (mul, "norm_mul"), (fit, "cdf")):
        assert not out.signed and np.all(out.probabilities >= 0)
        assert out.postprocessing == (name,) and out.n == 1000
        out.quantile(0.5)  # proper now
    assert d.postprocess("cdf").postprocess("norm_sub").postprocessing == ("cdf", "norm_sub")
    with pytest.raises(ValueError, match="postprocess must be one of"):
        d.postprocess("magic")
    # the fit moves a non-monotone CDF; a proper distribution is left unchanged by it
    assert not np.allclose(fit.probabilities, x)
    proper = Distribution([0.2, 0.3, 0.5])
    np.testing.assert_allclose(proper.postprocess("cdf").probabilities, [0.2, 0.3, 0.5])


def test_provenance_survives_rebin_pickle_and_json():
    from ldpkit import GRR
    from ldpkit.numeric import CFOBinning

    spec = CFOBinning(epsilon=1.0, buckets=8)
    d = Distribution.from_estimate([*SIGNED, 0.0, 0.0, 0.0], 0.0, 1.0, n=77, spec=spec)
    assert d.signed and d.n == 77 and d.spec == spec
    for copy in (
        pickle.loads(pickle.dumps(d)),
        Distribution.from_dict(json.loads(json.dumps(d.to_dict()))),
        d.rebin(16).rebin(8),
    ):
        assert copy.n == 77 and copy.spec == spec and copy.signed
        np.testing.assert_allclose(copy.probabilities, d.probabilities, atol=1e-15)
    assert d.replace(n=5).n == 5 and d.replace(spec=GRR(epsilon=1.0, domain_size=2)).spec != spec
    # from_estimate spreads the (zero-mean) missing mass evenly: total exactly 1
    e = Distribution.from_estimate([0.5, 0.3], n=10)
    np.testing.assert_allclose(e.probabilities, [0.6, 0.4])
