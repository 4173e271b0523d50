"""Synthetic generators: reproducible under a seed and distributed as documented."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ldpkit.datasets import beta, gaussian_items, load, uniform_items, zipf, zipf_probabilities
from ldpkit.testing import chisquare_gof

ALPHA = 1e-6
GENERATORS = [
    lambda rng: beta(n=1000, rng=rng),
    lambda rng: zipf(s=1.1, d=50, n=1000, rng=rng),
    lambda rng: gaussian_items(n=1000, rng=rng),
    lambda rng: uniform_items(d=10, n=1000, rng=rng),
]


@pytest.mark.parametrize("make", GENERATORS)
def test_reproducible_under_a_seed(make):
    a, b, c = make(3), make(3), make(4)
    assert np.array_equal(a.values, b.values)
    assert not np.array_equal(a.values, c.values)
    gen = np.random.default_rng(5)
    d1 = make(gen)
    d2 = make(gen)  # a Generator's stream advances
    assert not np.array_equal(d1.values, d2.values)


def test_zipf_probabilities_closed_form():
    h = 1 + 2**-2.0 + 3**-2.0
    assert zipf_probabilities(2.0, 3) == pytest.approx([1 / h, 2**-2.0 / h, 3**-2.0 / h], rel=1e-14)
    assert zipf_probabilities(0.0, 4) == pytest.approx([0.25] * 4)
    big = zipf_probabilities(2000.0, 5)  # no underflow to 0/0
    assert np.isfinite(big).all() and big[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="s must be"):
        zipf_probabilities(-1.0, 3)


def test_zipf_sample_matches_law():
    d = 64
    data = zipf(s=1.1, d=d, n=200_000, rng=0)
    assert data.kind == "categorical" and data.domain_size == d and data.values.dtype == np.int64
    assert chisquare_gof(data.counts, zipf_probabilities(1.1, d)) > ALPHA
    # power: s off by a factor 1.3 is rejected by the same test
    assert chisquare_gof(data.counts, zipf_probabilities(1.1 * 1.3, d)) < ALPHA


def test_beta_sample_matches_law():
    data = beta(n=100_000, rng=0)
    assert data.domain == (0.0, 1.0) and data.n == 100_000 and data.values.dtype == np.float64
    assert stats.kstest(data.values, stats.beta(5, 2).cdf).pvalue > ALPHA
    assert stats.kstest(data.values, stats.beta(5 * 1.3, 2).cdf).pvalue < ALPHA


def test_gaussian_items_moments_and_clipping():
    data = gaussian_items(mean=500, std=10, d=1024, n=100_000, rng=0)
    mean = data.values.mean()
    assert abs(mean - 500) < 6 * np.sqrt((10**2 + 1 / 12) / data.n)
    edge = gaussian_items(mean=0, std=5, d=8, n=1000, rng=0)
    assert edge.values.min() == 0 and edge.values.max() <= 7


def test_registry_loads_generators_with_arguments():
    assert load("zipf", s=1.5, d=8, n=10, rng=0).n == 10
    assert load("beta", n=5, rng=0).n == 5
    with pytest.raises(ValueError, match="n must be"):
        zipf(n=-1)
