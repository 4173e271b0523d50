"""Tests of ldpkit.queries: answers against brute force, query sampling laws, metrics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ldpkit import GRR, FrequencyEstimate
from ldpkit.consistency import base_pos, post_pos
from ldpkit.queries import (
    mse,
    random_ranges,
    random_subsets,
    range_answers,
    set_answers,
    single_value_answers,
    top_k_items,
)
from ldpkit.testing import chisquare_gof

ALPHA = 1e-6


def est_of(freqs, spec=None):
    freqs = np.asarray(freqs, dtype=float)
    return FrequencyEstimate(freqs, 0.01, n=1000, spec=spec)


@pytest.fixture
def data():
    rng = np.random.default_rng(5)
    truth = rng.dirichlet(np.full(30, 0.5))
    noisy = truth + rng.normal(0, 0.03, 30)
    return noisy, truth


# ---------------------------------------------------------------- answers vs brute force


def test_single_value_answers(data):
    f, _ = data
    assert np.array_equal(single_value_answers(f), f)
    assert np.array_equal(single_value_answers(f, [3, 0, 3]), f[[3, 0, 3]])
    assert np.array_equal(single_value_answers(f, clamp=True), np.maximum(f, 0))
    assert np.array_equal(single_value_answers(est_of(f)), f)


def test_set_answers_brute_force(data):
    f, _ = data
    subsets = random_subsets(f.size, 0.3, 25, rng=1)
    expected = np.array([sum(f[i] for i in row) for row in subsets])
    np.testing.assert_allclose(set_answers(f, subsets), expected, rtol=0, atol=1e-14)
    member = np.zeros((25, f.size), dtype=bool)
    for r, row in enumerate(subsets):
        member[r, row] = True
    np.testing.assert_allclose(set_answers(f, member), expected, rtol=0, atol=1e-14)
    np.testing.assert_allclose(
        set_answers(f, subsets, clamp=True), np.maximum(expected, 0), rtol=0, atol=1e-14
    )


def test_set_answers_membership_of_varying_sizes():
    f = np.array([0.1, -0.2, 0.3, 0.4])
    member = np.array([[True, False, False, False], [True, True, True, True], [False] * 4])
    np.testing.assert_allclose(set_answers(f, member), [0.1, 0.6, 0.0], atol=1e-15)


def test_range_answers_brute_force(data):
    f, _ = data
    ranges = random_ranges(f.size, 50, rng=2)
    expected = np.array([f[lo:hi].sum() for lo, hi in ranges])
    np.testing.assert_allclose(range_answers(f, ranges), expected, rtol=0, atol=1e-14)
    np.testing.assert_allclose(range_answers(f, [[4, 4]]), [0.0])


def test_top_k_items_brute_force():
    t = np.array([0.1, 0.3, 0.05, 0.3, 0.25])
    assert top_k_items(t, 3).tolist() == [1, 3, 4]  # tie 1/3 broken by index
    for k in range(1, 6):
        brute = sorted(range(5), key=lambda v: (-t[v], v))[:k]
        assert top_k_items(t, k).tolist() == brute


# ---------------------------------------------------------------- the query samplers


def test_random_subsets_shape_and_distinct():
    s = random_subsets(50, 0.2, 40, rng=3)
    assert s.shape == (40, 10) and s.dtype == np.int64
    assert all(len(set(row)) == 10 for row in s)
    assert np.all(np.diff(s, axis=1) > 0)  # sorted rows
    assert random_subsets(50, 1.0, 2, rng=0).tolist() == [list(range(50))] * 2
    assert random_subsets(50, 0.001, 2, rng=0).shape == (2, 1)  # at least one item


def test_random_subsets_seeded():
    a = random_subsets(40, 0.5, 5, rng=7)
    b = random_subsets(40, 0.5, 5, rng=np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, random_subsets(40, 0.5, 5, rng=8))


def _inclusion_pvalue(subsets, d):
    counts = np.bincount(subsets.ravel(), minlength=d)
    return chisquare_gof(counts, np.full(d, 1.0 / d))


def test_random_subsets_uniform_inclusion():
    # Sampling without replacement makes the chi-square conservative: rejection means bias.
    d = 20
    s = random_subsets(d, 0.25, 20000, rng=11)
    assert _inclusion_pvalue(s, d) > ALPHA
    # The same test does reject a sampler that slightly prefers small items.
    gen = np.random.default_rng(11)
    keys = gen.random((20000, d)) * (1 + 0.1 * np.arange(d) / d)
    biased = np.argpartition(keys, 4, axis=1)[:, :5]
    assert _inclusion_pvalue(biased, d) < ALPHA


def test_random_subsets_uniform_over_subsets():
    # All C(6, 2) = 15 pairs equally likely.
    s = random_subsets(6, 2 / 6, 30000, rng=12)
    pairs = {p: i for i, p in enumerate(itertools.combinations(range(6), 2))}
    idx = np.array([pairs[tuple(r)] for r in s.tolist()])
    assert chisquare_gof(np.bincount(idx, minlength=15), np.full(15, 1 / 15)) > ALPHA


def test_random_ranges_uniform_over_ranges():
    d = 6
    r = random_ranges(d, 42000, rng=13)
    assert np.all((0 <= r[:, 0]) & (r[:, 0] < r[:, 1]) & (r[:, 1] <= d))
    pairs = {p: i for i, p in enumerate(itertools.combinations(range(d + 1), 2))}
    idx = np.array([pairs[tuple(x)] for x in r.tolist()])
    assert chisquare_gof(np.bincount(idx, minlength=21), np.full(21, 1 / 21)) > ALPHA
    fixed = random_ranges(d, 100, length=3, rng=1)
    assert np.all(fixed[:, 1] - fixed[:, 0] == 3) and fixed[:, 1].max() <= d


# ---------------------------------------------------------------- the metrics


def test_mse_full_and_topk(data):
    f, t = data
    assert mse(f, t) == pytest.approx(np.mean((f - t) ** 2), rel=1e-14)
    assert mse(est_of(f), t, "full") == pytest.approx(np.mean((f - t) ** 2), rel=1e-14)
    idx = [0, 5, 7]
    assert mse(f, t, items=idx) == pytest.approx(np.mean((f[idx] - t[idx]) ** 2), rel=1e-14)
    top = sorted(range(t.size), key=lambda v: -t[v])[:5]
    assert mse(f, t, "topk", k=5) == pytest.approx(np.mean((f[top] - t[top]) ** 2), rel=1e-14)


def test_mse_set_and_range_brute_force(data):
    f, t = data
    subsets = random_subsets(t.size, 0.5, 30, rng=4)
    brute = np.mean([(f[row].sum() - t[row].sum()) ** 2 for row in subsets])
    assert mse(f, t, "set", subsets=subsets) == pytest.approx(brute, rel=1e-12)
    # drawing the same queries from the same seed gives the same value
    assert mse(f, t, "set", rho=0.5, n_queries=30, rng=4) == pytest.approx(brute, rel=1e-12)
    ranges = random_ranges(t.size, 30, rng=5)
    brute = np.mean([(f[lo:hi].sum() - t[lo:hi].sum()) ** 2 for lo, hi in ranges])
    assert mse(f, t, "range", ranges=ranges) == pytest.approx(brute, rel=1e-12)


def test_mse_set_full_domain_is_sum_error(data):
    f, t = data
    assert mse(f, t, "set", rho=1.0, n_queries=3, rng=0) == pytest.approx(
        (f.sum() - t.sum()) ** 2, rel=1e-12
    )


def test_post_pos_tag_clamps_answers(data):
    f, t = data
    spec = GRR(epsilon=1.0, domain_size=f.size)
    raw = est_of(f, spec)
    tagged = post_pos(raw)
    assert np.array_equal(tagged.frequencies, raw.frequencies)
    # single values: Post-Pos == Base-Pos
    assert mse(tagged, t) == pytest.approx(mse(base_pos(raw), t), rel=1e-14)
    assert mse(tagged, t) == pytest.approx(np.mean((np.maximum(f, 0) - t) ** 2), rel=1e-14)
    # sets: the sum is clamped, not the terms
    subsets = random_subsets(f.size, 0.1, 50, rng=1)
    brute = np.mean([(max(f[row].sum(), 0) - t[row].sum()) ** 2 for row in subsets])
    assert mse(tagged, t, "set", subsets=subsets) == pytest.approx(brute, rel=1e-12)
    assert np.all(set_answers(tagged, subsets) >= 0)
    # explicit override
    assert mse(tagged, t, clamp=False) == pytest.approx(mse(raw, t), rel=1e-14)
    assert mse(raw, t, clamp=True) == pytest.approx(mse(tagged, t), rel=1e-14)


# ---------------------------------------------------------------- validation


def test_validation_messages(data):
    f, t = data
    with pytest.raises(ValueError, match="truth must have one entry per item"):
        mse(f, t[:-1])
    with pytest.raises(ValueError, match="estimate must hold finite"):
        mse(np.r_[f[:-1], np.nan], t)
    with pytest.raises(ValueError, match="truth must hold finite"):
        mse(f, np.r_[t[:-1], np.inf])
    with pytest.raises(TypeError, match="estimate must be a FrequencyEstimate or a 1-D array"):
        mse(["a"] * t.size, t)
    with pytest.raises(ValueError, match="query must be one of"):
        mse(f, t, "median")
    with pytest.raises(ValueError, match="rho must be a finite number > 0 and <= 1"):
        random_subsets(10, 10, 1)
    with pytest.raises(ValueError, match="rho must be"):
        random_subsets(10, 0.0, 1)
    with pytest.raises(ValueError, match="k must be an integer in"):
        mse(f, t, "topk", k=t.size + 1)
    with pytest.raises(ValueError, match="subsets must be integers in"):
        set_answers(f, [[0, t.size]])
    with pytest.raises(ValueError, match="subsets must have one column per item"):
        set_answers(f, np.ones((2, 3), dtype=bool))
    with pytest.raises(ValueError, match="ranges must satisfy"):
        range_answers(f, [[3, 2]])
    with pytest.raises(ValueError, match="ranges must be an integer array"):
        range_answers(f, [[0.0, 2.0]])
    with pytest.raises(TypeError, match="clamp must be"):
        single_value_answers(f, clamp="yes")
    with pytest.raises(ValueError, match="length must be an integer in"):
        random_ranges(10, 1, length=11)
